"""Where masked diffusion's bound overtakes clm's exact likelihood as the budget grows: the lines per objective and
count of unique tokens, clm's best budget, the first budget whose bound falls below it (with Welch's interval over
seeds, as scipy computes it), the projection when none does, and the plot lmpt-compare and sweeps write."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from report_fakes import SHARED, eval_record, make_run, train_record
from scipy.stats import ttest_ind

from lmpt.report.compare import compare
from lmpt.report.crossover import CROSSOVER_PLOT, crossover_lines, find_crossovers
from lmpt.report.runs import find_runs

EPOCHS = (1, 4, 16, 64)
FLOPS_PER_EPOCH = 1e11


def likelihood_run(
    root: Path, objective: str, unique: int, epochs: int, seed: int, bits: float, model: str = "tiny"
) -> Path:
    """A completed run at `epochs` over `unique` tokens whose last evaluation holds `bits` per token."""
    flops = FLOPS_PER_EPOCH * epochs * unique / 10_000
    records = [
        train_record(10, 5.0, 1000.0, flops=flops, loss_tokens=1000),
        eval_record(10, 5.0, val_bits_per_token=bits),
    ]
    path = make_run(
        root / f"{model}-u{unique}-{objective}-{epochs}-s{seed}",
        SHARED,
        records,
        objective=objective,
        status={"status": "completed", "epochs": float(epochs)},
    )
    config_file = path / "config.yaml"
    config_file.write_text(config_file.read_text().replace("name: tiny", f"name: {model}"))
    with config_file.open("a") as config:
        config.write(f"data:\n  unique_tokens: {unique}\ntrainer:\n  budget: {epochs}epochs\n  seed: {seed}\n")
    return path


def study_runs(
    root: Path, clm: dict[int, float], mdlm: dict[int, float], unique: int = 10_000, model: str = "tiny"
) -> None:
    """Two seeds per budget, 0.02 bits apart."""
    for objective, curve in (("clm", clm), ("mdlm", mdlm)):
        for epochs, bits in curve.items():
            for seed, shift in ((0, -0.01), (1, 0.01)):
                likelihood_run(root, objective, unique, epochs, seed, bits + shift, model)


def test_the_bound_crossing_below_clms_best_is_found_with_welchs_interval(tmp_path: Path) -> None:
    study_runs(tmp_path, clm={1: 9.0, 4: 7.0, 16: 7.5, 64: 9.5}, mdlm={1: 10.0, 4: 8.5, 16: 7.2, 64: 6.8})
    lines = crossover_lines(find_runs([tmp_path]))
    assert [(line.objective, line.unique_tokens, line.bound) for line in lines] == [
        ("clm", 10_000, False),
        ("mdlm", 10_000, True),
    ]
    assert [p.epochs for p in lines[0].points] == [1.0, 4.0, 16.0, 64.0]  # by FLOPs, seeds pooled
    (crossing,) = find_crossovers(lines)
    assert crossing.exact.best().budget == "4epochs"
    assert crossing.below is not None and crossing.below.budget == "64epochs"  # 7.2 at 16 is not below 7.0
    expected = ttest_ind([6.79, 6.81], [6.99, 7.01], equal_var=False).confidence_interval(0.95)
    mean, low, high = crossing.difference
    assert mean == pytest.approx(-0.2) and (low, high) == pytest.approx((expected.low, expected.high))
    sentence = crossing.sentence()
    assert "clm is best at 4epochs" in sentence and "falls below it at 64epochs" in sentence and "-0.200" in sentence


def test_without_a_crossing_the_trend_says_where_it_would_cross(tmp_path: Path) -> None:
    study_runs(tmp_path, clm={1: 9.0, 4: 7.0, 16: 7.5, 64: 9.5}, mdlm={1: 10.0, 4: 9.0, 16: 8.0, 64: 7.5})
    (crossing,) = find_crossovers(crossover_lines(find_runs([tmp_path])))
    assert crossing.below is None and crossing.difference is None
    x = np.log10([FLOPS_PER_EPOCH * e for e in (4, 16, 64)])
    slope, intercept = np.polyfit(x, [9.0, 8.0, 7.5], 1)
    assert crossing.projected_flops == pytest.approx(10 ** ((7.0 - intercept) / slope))
    assert "stays above it at every budget" in crossing.sentence() and "would reach it" in crossing.sentence()


def test_a_bound_that_turns_up_projects_nothing(tmp_path: Path) -> None:
    """Its last three budgets still slope down (10, 9, 9.5), but its largest is not its best: no projection."""
    study_runs(tmp_path, clm={1: 9.0, 4: 7.0}, mdlm={1: 10.0, 4: 9.0, 16: 9.5})
    (crossing,) = find_crossovers(crossover_lines(find_runs([tmp_path])))
    assert crossing.projected_flops is None
    sentence = crossing.sentence()
    assert "past 4epochs it falls no further (9.500 at 16epochs), so more compute does not bring it down" in sentence


def test_each_count_of_unique_tokens_is_its_own_pair_of_lines(tmp_path: Path) -> None:
    study_runs(tmp_path, clm={1: 9.0, 4: 7.0, 16: 7.5}, mdlm={1: 10.0, 4: 8.5, 16: 6.9}, unique=10_000)
    study_runs(tmp_path, clm={1: 8.5, 4: 6.5, 16: 6.4}, mdlm={1: 9.5, 4: 8.0, 16: 7.0}, unique=20_000)
    crossings = find_crossovers(crossover_lines(find_runs([tmp_path])))
    assert [(c.exact.unique_tokens, c.below.budget if c.below else None) for c in crossings] == [
        (10_000, "16epochs"),
        (20_000, None),
    ]


def test_model_sizes_at_one_count_are_never_pooled(tmp_path: Path) -> None:
    study_runs(tmp_path, clm={1: 9.0, 4: 7.0}, mdlm={1: 10.0, 4: 6.9}, model="tiny")
    study_runs(tmp_path, clm={1: 8.0, 4: 6.0}, mdlm={1: 9.0, 4: 6.5}, model="micro")
    lines = crossover_lines(find_runs([tmp_path]))
    assert [(line.model, line.objective, len(line.points[0].bits)) for line in lines] == [
        ("micro", "clm", 2),
        ("micro", "mdlm", 2),
        ("tiny", "clm", 2),
        ("tiny", "mdlm", 2),
    ]
    crossings = {c.exact.model: c for c in find_crossovers(lines)}
    assert crossings["tiny"].below is not None and crossings["micro"].below is None
    assert "At 10,000 unique tokens (model=micro), clm is best at 4epochs" in crossings["micro"].sentence()


def test_lmpt_compare_writes_the_crossover_plot_and_says_where_it_falls(tmp_path: Path, capsys) -> None:
    study_runs(tmp_path / "runs", clm={1: 9.0, 4: 7.0, 16: 7.5}, mdlm={1: 10.0, 4: 8.5, 16: 6.9})
    compare([tmp_path / "runs"], tmp_path / "out")
    assert (tmp_path / "out" / CROSSOVER_PLOT).stat().st_size > 10_000
    printed = capsys.readouterr().out
    assert "mdlm's bound falls below it at 16epochs" in " ".join(printed.split())


def test_runs_of_one_budget_draw_no_crossover(tmp_path: Path) -> None:
    study_runs(tmp_path / "runs", clm={4: 7.0}, mdlm={4: 8.5})
    compare([tmp_path / "runs"], tmp_path / "out")
    assert not (tmp_path / "out" / CROSSOVER_PLOT).exists()


def test_runs_without_a_budget_axis_make_no_trend_and_sizes_sharing_a_name_are_apart(tmp_path: Path) -> None:
    # an `lmpt -m objective=clm,mdlm trainer.seed=0,1,2` sweep: no trainer.budget, so no budgets to trend over
    for objective, bits in (("clm", 7.0), ("mdlm", 7.5)):
        for seed in range(3):
            path = likelihood_run(tmp_path / "seeds", objective, 10_000, 4, seed, bits + 0.1 * seed)
            config = path / "config.yaml"
            config.write_text(config.read_text().replace("  budget: 4epochs\n", ""))
    assert crossover_lines(find_runs([tmp_path / "seeds"])) == []
    # two sizes both called "tiny": one line each, never one pooled line
    study_runs(tmp_path / "sizes", clm={1: 9.0, 4: 7.0}, mdlm={1: 10.0, 4: 6.9})
    for path in (tmp_path / "sizes").iterdir():
        if path.name.endswith("-s1"):
            config = path / "config.yaml"
            config.write_text(config.read_text().replace("name: tiny", "name: tiny\n  d_model: 64", 1))
    lines = crossover_lines(find_runs([tmp_path / "sizes"]))
    assert len(lines) == 4 and {len(line.points[0].bits) for line in lines} == {1}


def test_a_non_finite_figure_never_ranks_nor_feeds_a_trend(tmp_path: Path) -> None:
    from lmpt.report.ranking import Ranking, rank_runs

    study_runs(tmp_path, clm={1: 9.0, 4: 7.0}, mdlm={1: 10.0, 4: 6.9})
    diverged = likelihood_run(tmp_path, "mdlm", 10_000, 16, 0, float("nan"))
    runs = find_runs([tmp_path])
    ranked, _ = rank_runs(runs, Ranking("val_bits_per_token", "bits", higher_is_better=False))
    assert ranked[-1].path == diverged and ranked[0].path != diverged
    lines = crossover_lines(runs)
    assert all(point.budget != "16epochs" for line in lines for point in line.points)
