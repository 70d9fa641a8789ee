"""The data-constrained reproductions: their fits recover known constants, their frontiers and crossings are the
paper's definitions, and their bad input is one line before any run."""

from __future__ import annotations

import numpy as np
import pytest
from test_reproduce import refused

from lmpt.reproduce import crossover, repetition
from lmpt.reproduce.crossover import Crossover, first_crossing, frontier
from lmpt.reproduce.repetition import Repetition, data_law, effective_data, fit_data_law, fit_r_star


@pytest.mark.parametrize("r_star", [4.0, 15.39, 60.0])
def test_the_two_stage_fit_recovers_r_star_from_runs_the_law_made(r_star: float) -> None:
    """Fresh points give the data law, repeated ones R_D*: from figures the paper's form made (with noise of 0.002
    bits), the fit finds the constant within 15%."""
    rng = np.random.default_rng(1)
    law = (3.0, 40.0, 0.35)
    d = 409_600.0
    fresh = np.array([d / e for e in (1, 2, 4, 8, 16)])
    fitted = fit_data_law(fresh, data_law(fresh, *law) + rng.normal(0, 0.002, fresh.size))
    assert fitted == pytest.approx(law, rel=0.2)
    epochs = np.array([2, 4, 8, 16, 32, 64], dtype=float)
    bits = data_law(effective_data(d / epochs, epochs, r_star), *law) + rng.normal(0, 0.002, epochs.size)
    assert fit_r_star(fitted, d / epochs, epochs, bits) == pytest.approx(r_star, rel=0.15)
    # repetition that costs nothing: R_D* at the top of the range (the grid cannot tell it from infinity)
    free = data_law(d * np.ones_like(epochs), *law)
    assert fit_r_star(law, d / epochs, epochs, free) > 0.5 * repetition.R_RANGE[1]


def test_a_frontier_is_the_best_at_each_compute_and_the_crossing_the_first_compute_below() -> None:
    clm = [(1.0, 9.0), (2.0, 7.0), (4.0, 7.5), (8.0, 6.9), (16.0, 8.0)]
    mdlm = [(1.0, 9.5), (2.0, 8.0), (4.0, 7.2), (8.0, 6.5), (16.0, 6.0)]
    assert frontier(clm) == [(1.0, 9.0), (2.0, 7.0), (8.0, 6.9)]
    assert first_crossing(frontier(mdlm), frontier(clm)) == 8.0
    assert first_crossing(frontier(clm), frontier(mdlm)) is None  # clm leads among the cheap runs, not at the end
    # a lead among the cheapest runs that is lost again is no crossing
    assert first_crossing([(1.0, 8.0), (16.0, 7.5)], frontier(clm)) is None
    assert crossover.final_gap(frontier(mdlm), frontier(clm)) == pytest.approx(6.0 - 6.9)
    assert first_crossing([(1.0, 9.9), (4.0, 7.1)], frontier(clm)) is None  # never below clm's 7.0 from 2 on
    a, k = crossover._power_law({10_000: crossover.law(10_000), 40_000: crossover.law(40_000)})
    assert k == pytest.approx(2.174) and a == pytest.approx(2.12e15, rel=1e-6)
    assert crossover.law(10_000) == pytest.approx(9.5e10, rel=0.01)
    assert crossover.law(80_000) == pytest.approx(8.7e12, rel=0.01)


def test_the_grids_reach_past_the_laws_crossing_and_share_their_held_out_windows() -> None:
    runs = Crossover(2).runs()
    for unique in crossover.UNIQUE:
        flops = [r.flops for r in runs if r.labels["unique"] == unique]
        assert max(flops) > crossover.law(unique) > min(flops)
        assert max(flops) <= crossover.CAP_FACTOR * crossover.law(unique)
    assert {r.labels["objective"] for r in runs} == {"clm", "mdlm"}
    assert len({r.name for r in runs}) == len(runs)
    grid = Repetition(3).runs()
    assert len(grid) == 75 and {r.labels["seed"] for r in grid} == {0, 1, 2}
    # every iso-FLOP run trains the same D tokens; U * epochs = D
    iso = [r for r in grid if r.labels["kind"] == "repeated"]
    assert {r.flops for r in iso} == {repetition.FLOPS_PER_TOKEN * repetition.STEPS * repetition.TOKENS_PER_STEP}
    assert all(r.labels["unique"] * r.labels["epochs"] == repetition.STEPS * repetition.TOKENS_PER_STEP for r in iso)
    assert any("objective.input_mask_prob=0.25" in r.keys for r in grid)


def test_bad_grids_are_one_line_before_any_run(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert "epochs=0.5 is below 1" in refused(["crossover", "epochs=[0.5,4]"], capsys, monkeypatch)
    assert "ladder width 8 is too small for the 2,048-piece tokenizer" in refused(
        ["crossover", "ladder=[8,64]"], capsys, monkeypatch
    )
    assert "epochs=[four] must be a list of numbers" in refused(["crossover", "epochs=[four]"], capsys, monkeypatch)
    assert "fim takes no epochs= key: its grid is fixed" in refused(["fim", "epochs=[4]"], capsys, monkeypatch)
    assert "needs 1,000,000 unique training tokens and the text holds 434,477" in refused(
        ["crossover", "unique_tokens=[1000000]", "dry_run=true"], capsys, monkeypatch
    )
    assert list(tmp_path.iterdir()) == []
