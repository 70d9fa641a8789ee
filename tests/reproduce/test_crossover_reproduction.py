"""lmpt-reproduce crossover: its verdicts on made-up runs for each outcome (a crossing near the law where the paper's
conditions hold, none where they hold, none where they are missed, runs missing, two seeds too few), the paper's recipe
in every planned run, its plans at both scales, and bad grids refused in one line."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
from test_reproduce import refused

from lmpt.reproduce import grid
from lmpt.reproduce.cli import reproduce
from lmpt.reproduce.crossover.frontier import law
from lmpt.reproduce.crossover.plan import RECIPE
from lmpt.reproduce.crossover.reproduction import Crossover
from lmpt.reproduce.reproduction import FinishedRun, PlannedRun, Scale
from lmpt.reproduce.verdict import Verdict


def made_up(reproduction: Crossover, bits: Callable[[PlannedRun], float], kept=lambda run: True) -> list[FinishedRun]:
    """Completed runs of the plan (those `kept`) whose held-out figure is `bits(run)`, logged as lmpt logs it."""
    return [
        FinishedRun(run, {"status": "completed"}, [{"step": 1, "flops": run.flops, "val_bits_per_token": bits(run)}])
        for run in reproduction.runs()
        if kept(run)
    ]


def distance(run: PlannedRun) -> float:
    """How many decades the run's compute (6ND) lies below the law's C_crit at its U (0 at or past it)."""
    return max(0.0, -math.log10(run.paper_flops / law(run.labels["unique"])))


def clm_then_mdlm(run: PlannedRun) -> float:
    """clm leads below C_crit(U), mdlm from it on: its frontier below clm's from the first run past the law (each
    seed's figures a little apart)."""
    ar = 4.0 + distance(run) + 0.01 * run.labels["seed"]
    if run.labels["objective"] == "clm":
        return ar
    return ar - 0.1 if run.paper_flops >= law(run.labels["unique"]) else ar + 0.05 + 0.5 * distance(run)


def clm_always(run: PlannedRun) -> float:
    return 4.0 + distance(run) + (0.2 if run.labels["objective"] == "mdlm" else 0.0)


def test_a_crossing_near_the_law_where_the_papers_conditions_hold_is_reproduced() -> None:
    paper = Crossover(Scale.paper)
    findings = paper.analyse(made_up(paper, clm_then_mdlm))
    (near,) = findings.claims
    assert near.verdict is Verdict.reproduced, near.sentence()
    assert "x the law" in near.figure and "in lmpt's count" in near.figure
    assert all(c.met is not False for c in findings.conditions), findings.conditions
    assert "crossing at" in findings.headline


def test_no_crossing_where_the_conditions_hold_is_not_reproduced_and_where_missed_inconclusive() -> None:
    paper = Crossover(Scale.paper)
    (near,) = paper.analyse(made_up(paper, clm_always)).claims
    assert near.verdict is Verdict.not_reproduced and "no crossing up to 3.7x C_crit" in near.figure

    laptop = Crossover()
    findings = laptop.analyse(made_up(laptop, clm_always))
    assert [c.verdict for c in findings.claims] == [Verdict.inconclusive] * 4  # three U and the exponent
    reasons = " ".join(findings.claims[0].reasons)
    assert "model sizes (parameters with the embedding)" in reasons and "unique tokens U" in reasons
    assert "not reproduced" not in findings.verdict
    missed = {c.name for c in findings.conditions if c.met is False}
    assert {"model sizes (parameters with the embedding)", "unique tokens U", "compute-optimal sizing"} <= missed
    assert "training recipe" not in missed
    # the compute the grid reaches is computed from the runs, in multiples of C_crit (6ND)
    reach = next(c for c in findings.conditions if c.name.startswith("compute reached"))
    largest = max(r.paper_flops for r in laptop.runs() if r.labels["unique"] == 40_000)
    assert f"{largest / law(40_000):.2g}x at U = 40k" in reach.grid and reach.met


def test_no_runs_or_no_mdlm_run_is_no_verdict_naming_the_missing_runs() -> None:
    laptop = Crossover()
    findings = laptop.analyse([])
    assert [c.verdict for c in findings.claims] == [None] * 4
    assert "no completed clm or mdlm run at U = 10k" in findings.claims[0].reasons[0]
    assert "u10000-w16-1x-clm-seed0" in findings.claims[0].reasons[0]
    assert findings.verdict.startswith("no verdict") and "runs missing" in findings.headline

    clm_only = laptop.analyse(made_up(laptop, clm_always, lambda run: run.labels["objective"] == "clm"))
    assert clm_only.claims[0].verdict is None and "no completed mdlm run at U = 10k" in clm_only.claims[0].reasons[0]
    # the document still lists every run, a dash where none completed
    every = dict(clm_only.sections)["Every run"]
    assert "| 10,000 | mdlm | 16 |" in every and "— / — / —" in every


def test_two_seeds_whose_interval_is_wider_than_the_crossing_are_no_verdicts_basis() -> None:
    two = Crossover(seeds=2, unique_tokens=["40000"])

    def apart(run: PlannedRun) -> float:
        ar = 4.0 + distance(run)
        if run.labels["objective"] == "clm":
            return ar
        start = law(40_000) * (1.0 if run.labels["seed"] == 0 else 6.0)
        return ar - 0.1 if run.paper_flops >= start else ar + 0.05

    findings = two.analyse(made_up(two, apart))
    (near,) = findings.claims
    assert "2 seeds: the t interval" in " ".join(near.reasons) and near.verdict is Verdict.inconclusive
    assert (
        "wider than the value, no verdict's basis"
        in dict(findings.sections)["The critical compute, per count of unique tokens"]
    )


@pytest.mark.parametrize("scale", list(Scale))
def test_every_planned_run_trains_with_the_papers_recipe_at_a_compute_optimal_size(scale: Scale) -> None:
    reproduction = Crossover(scale)
    runs = reproduction.runs()
    for run in runs:
        keys = dict(k.split("=", 1) for k in run.keys)
        assert {k: keys[k] for k in RECIPE} == RECIPE
        assert int(keys["scheduler.warmup_steps"]) == max(1, round(0.01 * int(keys["trainer.max_steps"])))
        assert run.paper_flops <= 8.0 * law(run.labels["unique"])
    assert {r.labels["objective"] for r in runs} == {"clm", "mdlm"} and len({r.name for r in runs}) == len(runs)
    # mdlm's head runs on about half the positions: lmpt counts it fewer FLOPs than clm at the same 6ND
    clm, mdlm = (next(r for r in runs if r.labels["objective"] == o) for o in ("clm", "mdlm"))
    assert clm.paper_flops == mdlm.paper_flops and mdlm.flops < clm.flops
    # each budget trains a model within 2x of D / 20 parameters wherever the ladder holds one under the cap
    budgets = {(r.labels["unique"], r.labels["epochs"]) for r in runs}
    smallest = min(s.parameters for s in reproduction.ladder)
    for unique, epochs in budgets:
        sizes = [r.labels["parameters"] for r in runs if (r.labels["unique"], r.labels["epochs"]) == (unique, epochs)]
        best = unique * epochs / 20
        if best >= smallest and 6.0 * 2 * best * unique * epochs <= 8.0 * law(unique):
            assert min(abs(math.log(n / best)) for n in sizes) <= math.log(2.0)


def test_the_dry_run_plans_both_scales_and_the_laptop_in_about_90_minutes(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    reproduce(["crossover", "dry_run=true", "slots=2"])
    out = capsys.readouterr().out
    assert f"{len(Crossover().runs())} runs to train" in out and "in the paper's 6ND" in out
    plan = grid.plan_grid(Crossover(), tmp_path / "x", "2", 1e9, dry_run=True)
    assert plan.estimate_s <= 95 * 60
    reproduce(["crossover", "scale=paper", "dry_run=true"])
    out = capsys.readouterr().out
    assert f"{len(Crossover(Scale.paper).runs())} runs to train" in out and "GPU-hours" in out
    assert list(tmp_path.iterdir()) == []


def test_bad_grids_are_one_line_before_anything_is_written(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    for key in ("unique_tokens=[inf]", "unique_tokens=[nan]", "unique_tokens=[1e400]", "ladder=[inf]", "ladder=[nan]"):
        assert "must be a number" in refused(["crossover", key, "dry_run=true"], capsys, monkeypatch), key
    assert "epochs=inf must be a finite number of at least 1" in refused(
        ["crossover", "epochs=[inf]", "dry_run=true"], capsys, monkeypatch
    )
    assert "epochs=0.5 must be a finite number of at least 1" in refused(
        ["crossover", "epochs=[0.5,4]"], capsys, monkeypatch
    )
    assert "the grid has no run at unique_tokens=40000" in refused(
        ["crossover", "epochs=[1e300]", "unique_tokens=[40000]"], capsys, monkeypatch
    )
    assert "the grid has no run at unique_tokens=129" in refused(
        ["crossover", "unique_tokens=[129]"], capsys, monkeypatch
    )
    assert "unique_tokens=100 must be a finite number of at least 129" in refused(
        ["crossover", "unique_tokens=[100]"], capsys, monkeypatch
    )
    assert "cannot reach the law's crossing at unique_tokens=40000" in refused(
        ["crossover", "epochs=[1,4]", "unique_tokens=[40000]"], capsys, monkeypatch
    )
    assert "starts past the law's crossing" in refused(
        ["crossover", "epochs=[128]", "ladder=[16]", "unique_tokens=[10000]"], capsys, monkeypatch
    )
    assert "ladder width 1e+300 is past any model lmpt trains" in refused(
        ["crossover", "ladder=[16,1e300]"], capsys, monkeypatch
    )
    assert "unique_tokens=1e+300 is more text than any corpus" in refused(
        ["crossover", "unique_tokens=[1e300]"], capsys, monkeypatch
    )
    assert "ladder width 8 is too small for the 2,048-piece tokenizer" in refused(
        ["crossover", "ladder=[8,64]"], capsys, monkeypatch
    )
    assert "names 2 texts: crossover takes one" in refused(
        ["crossover", "corpus=[wikitext,shakespeare]"], capsys, monkeypatch
    )
    assert "corpus=nowhere is neither a data group" in refused(["crossover", "corpus=[nowhere]"], capsys, monkeypatch)
    assert "crossover takes no budgets= key" in refused(["crossover", "budgets=[1e6]"], capsys, monkeypatch)
    assert list(tmp_path.iterdir()) == []
