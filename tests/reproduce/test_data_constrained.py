"""The data-constrained reproductions: their fits recover known constants, their frontiers and crossings are the
paper's definitions, and their bad input is one line before any run."""

from __future__ import annotations

import pytest
from test_reproduce import refused

from lmpt.reproduce.crossover.frontier import final_gap, first_crossing, frontier, law, power_law
from lmpt.reproduce.crossover.plan import CAP_FACTOR
from lmpt.reproduce.crossover.reproduction import Crossover
from lmpt.reproduce.data_constrained_law import PAPER_LAW
from lmpt.reproduce.repetition import fit
from lmpt.reproduce.repetition.plan import RECIPES
from lmpt.reproduce.repetition.reproduction import Repetition
from lmpt.reproduce.reproduction import Scale


@pytest.mark.parametrize("scale", [Scale.laptop, Scale.paper])
def test_the_repetition_grids_give_the_laws_constants_back_from_losses_the_law_made(scale, monkeypatch) -> None:
    """At every cell of each scale's grid, the paper's law (its stage 1, R_D* 15.39, R_N* 5.31) makes the losses;
    the grid's fit, stage 1 through its single-epoch runs and both decays jointly, finds the constants within 5%."""
    monkeypatch.setattr(fit, "FIT_STARTS", 8)
    found = fit.recover_constants(PAPER_LAW, Repetition(scale).runs())
    assert found == pytest.approx((PAPER_LAW.r_d_star, PAPER_LAW.r_n_star), rel=0.05)


def test_a_frontier_is_the_best_at_each_compute_and_the_crossing_the_first_compute_below() -> None:
    clm = [(1.0, 9.0), (2.0, 7.0), (4.0, 7.5), (8.0, 6.9), (16.0, 8.0)]
    mdlm = [(1.0, 9.5), (2.0, 8.0), (4.0, 7.2), (8.0, 6.5), (16.0, 6.0)]
    assert frontier(clm) == [(1.0, 9.0), (2.0, 7.0), (8.0, 6.9)]
    assert first_crossing(frontier(mdlm), frontier(clm)) == 8.0
    assert first_crossing(frontier(clm), frontier(mdlm)) is None  # clm leads among the cheap runs, not at the end
    # a lead among the cheapest runs that is lost again is no crossing
    assert first_crossing([(1.0, 8.0), (16.0, 7.5)], frontier(clm)) is None
    assert final_gap(frontier(mdlm), frontier(clm)) == pytest.approx(6.0 - 6.9)
    assert first_crossing([(1.0, 9.9), (4.0, 7.1)], frontier(clm)) is None  # never below clm's 7.0 from 2 on
    a, k = power_law({10_000: law(10_000), 40_000: law(40_000)})
    assert k == pytest.approx(2.174) and a == pytest.approx(2.12e15, rel=1e-6)
    assert law(10_000) == pytest.approx(9.5e10, rel=0.01)
    assert law(80_000) == pytest.approx(8.7e12, rel=0.01)


def test_the_grids_reach_past_the_laws_crossing_and_share_their_held_out_windows() -> None:
    planned = Crossover()
    runs = planned.runs()
    for unique in planned.unique:  # in the paper's 6ND, the law's count
        flops = [r.paper_flops for r in runs if r.labels["unique"] == unique]
        assert max(flops) > law(unique) > min(flops)
        assert max(flops) <= CAP_FACTOR * law(unique)
    assert {r.labels["objective"] for r in runs} == {"clm", "mdlm"}
    assert len({r.name for r in runs}) == len(runs)
    grid = Repetition(seeds=3).runs()
    assert {r.labels["seed"] for r in grid} == {0, 1, 2} and len({r.name for r in grid}) == len(grid)
    # every repeated run reads epochs x U tokens (to an optimizer step) of its first U, over the whole ladder
    repeated = [r for r in grid if r.labels["epochs"] > 1]
    step = RECIPES[Scale.laptop].tokens_per_step
    assert all(0 <= r.labels["unique"] * r.labels["epochs"] - r.labels["tokens"] < step for r in repeated)
    assert {r.labels["width"] for r in repeated} == {16, 32, 64}


def test_bad_grids_are_one_line_before_any_run(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert "epochs=0.5 must be a finite number of at least 1" in refused(
        ["crossover", "epochs=[0.5,4]"], capsys, monkeypatch
    )
    assert "ladder width 8 is too small for the 2,048-piece tokenizer" in refused(
        ["crossover", "ladder=[8,64]"], capsys, monkeypatch
    )
    assert "epochs=four must be a number" in refused(["crossover", "epochs=[four]"], capsys, monkeypatch)
    assert "fim takes no epochs= key: it takes corpus, ladder, budgets" in refused(
        ["fim", "epochs=[4]"], capsys, monkeypatch
    )
    assert "needs 500,000 unique training tokens and the text holds 434,477" in refused(
        ["crossover", "unique_tokens=[500000]"], capsys, monkeypatch
    )
    assert list(tmp_path.iterdir()) == []
