"""Ranking a table of runs only by a loss every run measured the same way, and saying so."""

from __future__ import annotations

from pathlib import Path

import pytest
from report_fakes import SHARED, eval_record, make_run, train_record

from lmpt.report.ranking import rank_runs
from lmpt.report.runs import find_runs
from lmpt.report.sweep import summarize_sweep

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def masked_run(path: Path, mask_prob: float, own: float, fixed: float | None, eval_mask_prob: float = 0.15) -> None:
    """An mlm job: its own-rate val_loss `own` and the fixed-rate `fixed`, with FLOPs and loss-bearing tokens."""
    extra = {"val_fixed_loss": fixed, "val_fixed_acc": 0.2, "val_fixed_ppl": 2.718281828**fixed} if fixed else {}
    work = lambda step: {"tokens": 512 * step, "loss_tokens": int(512 * step * mask_prob), "flops": 3e9 * step}
    make_run(
        path,
        [*SHARED, f"objective.mask_prob={mask_prob}"],
        [
            train_record(10, own + 0.5, 4000.0, **work(10)),
            eval_record(10, own + 0.3, **work(10), **{k: v + 0.3 for k, v in extra.items()}),
            train_record(20, own + 0.2, 4000.0, **work(20)),
            eval_record(20, own, **work(20), **extra),
        ],
        objective="mlm",
        status={"status": "completed", "wall_s": 10.0},
    )
    config = path / "config.yaml"
    config.write_text(config.read_text().replace("name: mlm\n", f"name: mlm\n  eval_mask_prob: {eval_mask_prob}\n"))


def test_masked_runs_are_ranked_by_the_fixed_rate_loss_not_their_own(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    masked_run(sweep / "0", 0.05, own=2.0, fixed=6.0)  # the easiest own task, the worst model
    masked_run(sweep / "1", 0.15, own=5.0, fixed=5.0)
    masked_run(sweep / "2", 0.4, own=5.5, fixed=5.2)
    ranked, ranking = rank_runs(find_runs([sweep]))
    assert [r.path.name for r in ranked] == ["1", "2", "0"]
    assert ranking.key == "val_fixed_loss"
    assert "eval_mask_prob=0.15" in ranking.header and "own training masking rate" in ranking.header
    assert ranked[0].compute_at[20] == (6e10, int(512 * 20 * 0.15))

    summarize_sweep(sweep)
    markdown = (sweep / "summary.md").read_text().splitlines()
    assert markdown[2].startswith("Ranked by val_fixed_loss: masked-token loss at the shared eval_mask_prob=0.15")
    assert markdown[4].startswith("| run | objective | status | step | val_fixed_loss | val_fixed_ppl | val_loss |")
    assert [line.split(" | ")[0] for line in markdown[6:] if line.startswith("|")] == [
        "| objective.mask_prob=0.15",
        "| objective.mask_prob=0.4",
        "| objective.mask_prob=0.05",
    ]
    assert "| 6.00e+10 |" in markdown[6]
    assert (sweep / "val_loss.png").read_bytes()[:8] == PNG_SIGNATURE


@pytest.mark.parametrize(
    ("fixed", "rates", "expected"),
    [
        ((6.0, None), (0.15, 0.15), None),  # one run has no fixed-rate loss: nothing comparable
        ((6.0, 5.0), (0.15, 0.3), None),  # two different yardsticks
    ],
)
def test_no_ranking_without_a_common_yardstick(tmp_path: Path, fixed, rates, expected) -> None:
    masked_run(tmp_path / "0", 0.05, own=2.0, fixed=fixed[0], eval_mask_prob=rates[0])
    masked_run(tmp_path / "1", 0.4, own=5.0, fixed=fixed[1], eval_mask_prob=rates[1])
    ranked, ranking = rank_runs(find_runs([tmp_path]))
    assert ranking.key is expected
    assert ranking.header.startswith("not ranked")
    assert [r.path.name for r in ranked] == ["0", "1"]


def test_runs_of_one_objective_without_a_yardstick_rank_by_val_loss(tmp_path: Path) -> None:
    for name, loss in (("0", 6.0), ("1", 5.0)):
        make_run(tmp_path / name, [*SHARED, f"optimizer.lr={name}"], [eval_record(10, loss)], objective="clm")
    ranked, ranking = rank_runs(find_runs([tmp_path]))
    assert (ranking.key, ranking.header) == ("val_loss", "ranked by val_loss")
    assert [r.path.name for r in ranked] == ["1", "0"]
