"""A loss-ranked sweep over several seeds: one row per setting with its mean, spread and 95% interval over the seeds,
each gap to the next setting tested by Welch's t; a ranking of one seed per setting says it cannot tell."""

from __future__ import annotations

import csv
import statistics
from pathlib import Path

import numpy as np
import pytest
from report_fakes import SHARED, eval_record, make_run, train_record

from lmpt.downstream.significance import holm, seed_interval, welch_t
from lmpt.report.compare import compare
from lmpt.report.sweep import summarize_sweep

# the fixed-rate loss of each mask rate at seeds 0, 1, 2: 0.4 clearly ahead of 0.05, 0.15 within noise of 0.4
LOSSES = {0.4: [5.00, 5.04, 4.98], 0.15: [5.03, 5.06, 5.00], 0.05: [5.50, 5.46, 5.53]}


def seeded_run(path: Path, mask_prob: float, seed: int, fixed: float, seed_override: bool = True) -> Path:
    """An mlm job at `mask_prob` and trainer.seed `seed`, its last fixed-rate loss `fixed`, as a sweep writes it."""
    work = lambda step: {"tokens": 512 * step, "loss_tokens": int(512 * step * mask_prob), "flops": 3e9 * step}
    extra = lambda loss: {"val_fixed_loss": loss, "val_fixed_ppl": 2.718281828**loss}
    overrides = ["objective=mlm", *SHARED, f"objective.mask_prob={mask_prob}"]
    make_run(
        path,
        [*overrides, f"trainer.seed={seed}"] if seed_override else overrides,
        [
            train_record(10, fixed + 0.6, 4000.0, **work(10)),
            eval_record(10, fixed + 0.4, **work(10), **extra(fixed + 0.3)),
            train_record(20, fixed + 0.2, 4000.0, **work(20)),
            eval_record(20, fixed + 0.1, **work(20), **extra(fixed)),
        ],
        objective="mlm",
        status={"status": "completed", "wall_s": 10.0 + seed},
    )
    config = path / "config.yaml"
    config.write_text(
        config.read_text().replace("name: mlm\n", "name: mlm\n  eval_mask_prob: 0.15\n") + f"trainer:\n  seed: {seed}\n"
    )
    return path


def mask_sweep(root: Path, losses: dict[float, list[float]] = LOSSES) -> Path:
    """`lmpt -m objective=mlm objective.mask_prob=... trainer.seed=0,1,2`: one job per rate and seed."""
    job = 0
    for rate, per_seed in losses.items():
        for seed, loss in enumerate(per_seed):
            seeded_run(root / str(job), rate, seed, loss)
            job += 1
    return root


def read_csv(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_three_rates_by_three_seeds_are_three_rows_with_mean_spread_interval_and_welch_marks(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    sweep = mask_sweep(tmp_path / "sweep")
    summarize_sweep(sweep)
    out = capsys.readouterr().out
    rows = read_csv(sweep / "summary.csv")
    assert [r["run"] for r in rows] == [
        "objective.mask_prob=0.4",
        "objective.mask_prob=0.15",
        "objective.mask_prob=0.05",
    ]
    order = [0.4, 0.15, 0.05]
    for row, rate in zip(rows, order, strict=True):
        assert row["seeds"] == "0, 1, 2"
        assert float(row["val_fixed_loss"]) == pytest.approx(statistics.fmean(LOSSES[rate]))
        assert float(row["val_fixed_loss_std"]) == pytest.approx(statistics.stdev(LOSSES[rate]), abs=1e-4)
        low, high = seed_interval(LOSSES[rate])
        assert (float(row["val_fixed_loss_low"]), float(row["val_fixed_loss_high"])) == pytest.approx((low, high), 1e-4)
        assert len(row["path"].split()) == 3  # the three seeds' run directories
    raw = [welch_t(LOSSES[a], LOSSES[b]) for a, b in zip(order, order[1:], strict=False)]
    adjusted = holm(raw)
    assert [r["vs_next_test"] for r in rows] == ["Welch t", "Welch t", ""]
    assert [float(r["vs_next_holm_p"]) for r in rows[:2]] == pytest.approx(adjusted, rel=0.05)
    assert rows[0]["vs_next"].startswith("≈") and rows[1]["vs_next"].startswith(">")  # 0.4 ≈ 0.15 > 0.05

    assert "trainer.seed=0,1,2 pooled into one row" in out and "Welch's t-test over their seeds" in out
    assert "The top 2 are not distinguishable at 95%" in out and "One seed" not in out
    markdown = (sweep / "summary.md").read_text()
    assert "| seeds |" in markdown and "val_fixed_loss_std" in markdown and "trainer.seed=0,1,2" in markdown
    assert "trainer.seed" not in markdown.splitlines()[0]  # the shared overrides: the seed is not one
    assert str(tmp_path) not in out.split("wrote ")[0]  # no machine path in the table's title


def test_a_one_seed_ranking_says_so_and_names_its_seed(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    for job, rate in enumerate(LOSSES):
        seeded_run(tmp_path / "sweep" / str(job), rate, 1337, LOSSES[rate][0], seed_override=False)
    summarize_sweep(tmp_path / "sweep")
    out = capsys.readouterr().out
    assert "One seed per run (trainer.seed=1337): the ranking cannot say how sure it is" in out
    markdown = (tmp_path / "sweep" / "summary.md").read_text().splitlines()
    assert markdown[2].startswith("Ranked by val_fixed_loss") and "One seed per run (trainer.seed=1337)" in markdown[2]
    assert len(read_csv(tmp_path / "sweep" / "summary.csv")) == 3


def test_copies_of_one_seed_are_not_pooled_and_a_lone_seed_stays_untested(tmp_path: Path) -> None:
    seeded_run(tmp_path / "a" / "0", 0.4, 0, 5.0)
    seeded_run(tmp_path / "b" / "0", 0.4, 0, 5.1)  # the same setting and seed again: not a second sample
    seeded_run(tmp_path / "c" / "0", 0.15, 0, 5.2)
    seeded_run(tmp_path / "c" / "1", 0.15, 1, 5.3)
    compare([tmp_path], tmp_path / "report")
    rows = read_csv(tmp_path / "report" / "compare.csv")
    assert [(r["run"], r["seeds"]) for r in rows] == [
        ("objective.mask_prob=0.4 trainer.seed=0", "0"),
        ("objective.mask_prob=0.4 trainer.seed=0", "0"),
        ("objective.mask_prob=0.15", "0, 1"),
    ]
    assert [r["vs_next"] for r in rows] == ["?", "?", ""]  # one seed against one, and one against two: untested
    assert rows[2]["val_fixed_loss_low"] != "" and rows[0]["val_fixed_loss_low"] == ""


def test_the_pooled_curves_are_the_seeds_mean(tmp_path: Path) -> None:
    from lmpt.report.ranking import rank_runs
    from lmpt.report.runs import find_runs
    from lmpt.report.seed_pool import pool_seeds

    runs, ranking = rank_runs(find_runs([mask_sweep(tmp_path)]))
    pool = pool_seeds(runs, ranking)
    assert pool is not None and len(pool.rows) == 3
    best = pool.rows[0]
    assert best.seeds == [0, 1, 2] and best.fixed_curve[-1] == (20, pytest.approx(np.mean(LOSSES[0.4])))
    assert best.compute_at[20] == (6e10, int(512 * 20 * 0.4))


def test_the_curve_charts_title_names_no_machine_path_and_every_line_fits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lmpt.report import plot

    titles: list[str] = []

    def spy(runs, path, log_y=False, title="", ranking=None) -> None:
        fig = plot.draw_val_curves(runs, log_y, title, ranking)
        titles.append(fig.texts[0].get_text())  # the suptitle as drawn

    monkeypatch.setattr(plot, "plot_val_curves", spy)
    summarize_sweep(mask_sweep(tmp_path / "sweep"))
    (title,) = titles
    assert str(tmp_path) not in title and "sweep of 9 jobs" in title and "mean over its seeds" in title
    assert max(len(line) for line in title.splitlines()) <= 160


def test_a_setting_with_a_diverged_seed_never_ranks_first(tmp_path: Path) -> None:
    """A seed-pooled setting whose mean is -inf or NaN (one seed's loss diverged) goes after the ranked rows,
    untested, as a single diverged run does; it once ranked first with "p=nan"."""
    mask_sweep(tmp_path / "sweep", {0.4: [5.00, 5.04], 0.15: [float("-inf"), 5.06], 0.05: [5.50, float("nan")]})
    compare([tmp_path / "sweep"], tmp_path / "report")
    rows = read_csv(tmp_path / "report" / "compare.csv")
    assert [r["run"] for r in rows][0] == "objective.mask_prob=0.4"
    assert {r["run"] for r in rows[1:]} == {"objective.mask_prob=0.15", "objective.mask_prob=0.05"}
    assert all(r["vs_next"] in ("", "?") for r in rows)
