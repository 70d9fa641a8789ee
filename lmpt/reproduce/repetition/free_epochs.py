"""Is 4 epochs of repeated data nearly free (Muennighoff et al. 2023, Figure 3)? For clm, at the largest budget D whose
D/4 is a U of the grid: 4 epochs of D/4 against 1 epoch of D, the same compute, paired by seed at the budget's
compute-optimal rung: the claim, its conditions, and its table over every rung and both objectives."""

from __future__ import annotations

import math
import statistics

from lmpt.downstream.significance import seed_interval
from lmpt.report.markdown import markdown_table
from lmpt.reproduce.data_constrained_law import LossPoint
from lmpt.reproduce.ladder import TOKENS_PER_PARAMETER, Shape, optimal_parameters
from lmpt.reproduce.repetition.findings import (
    OPTIMAL_FACTOR,
    PAPER_PARAMETERS,
    loss_condition,
    missing_text,
    parameters_condition,
)
from lmpt.reproduce.repetition.plan import OBJECTIVES, RepetitionGrid
from lmpt.reproduce.reproduction import AR, PlannedRun
from lmpt.reproduce.verdict import Condition, Evidence, judge, within_margin

FREE_EPOCHS = 4
FREE_MARGIN = 0.01
""""Nearly free": 4 epochs of D/4 within 1% of the held-out loss of 1 epoch of D, the paired interval inside."""


def free(grid: RepetitionGrid, points: list[LossPoint], planned: list[PlannedRun], done: set[str]) -> dict:
    """ "4 epochs nearly free" for clm: at the largest budget D whose D/4 is a U of the grid, 4 epochs of D/4
    against 1 epoch of D, seed by seed, at the budget's compute-optimal rung (every rung in the table)."""
    pairs = [d for d in grid.budgets if d % FREE_EPOCHS == 0 and d // FREE_EPOCHS in grid.unique]
    pairs = pairs if FREE_EPOCHS in grid.epochs else []
    claim_name = "4 epochs of repeated data are nearly free (autoregression)"
    if not pairs:
        why = f"the grid has no budget D with D/{FREE_EPOCHS} among its unique tokens at {FREE_EPOCHS} epochs"
        claim = judge(claim_name, Evidence.missing, "", [], why)
        return {"claim": claim, "section": why + ".", "share": ""}
    budget = max(pairs)
    once_cell = next(c for c in grid.cells() if c.unique == budget and c.tokens <= c.unique)
    best = min(grid.rungs(once_cell), key=lambda s: abs(math.log(s.parameters / optimal_parameters(budget))))
    loss = {p.name: p.loss for p in points}
    rows, verdict_diffs, verdict_once, lost = [], [], [], []
    for objective in OBJECTIVES:
        for shape in grid.rungs(once_cell):
            once, four = (
                {r.labels["seed"]: r.name for r in planned if _is(r, objective, shape, unique, epochs)}
                for unique, epochs in ((budget, 1.0), (budget // FREE_EPOCHS, FREE_EPOCHS))
            )
            diffs, singles = [], []
            for seed, name in once.items():  # paired by seed
                one, repeated = loss.get(name, math.nan), loss.get(four[seed], math.nan)
                if math.isfinite(one) and math.isfinite(repeated):
                    diffs.append(repeated - one)
                    singles.append(one)
            if objective == AR and shape == best:
                verdict_diffs, verdict_once = diffs, singles
                lost = [name for name in [*once.values(), *four.values()] if name not in done]
            rows.append(_free_row(objective, shape, diffs, singles, shape == best))
    conditions = _free_conditions(grid, budget, best)
    figure, why, headline = "", "", ""
    if lost:
        evidence, why = Evidence.missing, missing_text(lost)
    elif len(verdict_diffs) < 2:
        evidence, why = Evidence.undecided, "fewer than 2 seeds with both runs: no interval"
    else:
        span = seed_interval(verdict_diffs)
        low, high = span if span is not None else (math.nan, math.nan)
        margin = FREE_MARGIN * statistics.fmean(verdict_once)
        evidence = within_margin(low, high, margin)
        share = statistics.fmean(verdict_diffs) / statistics.fmean(verdict_once)
        headline = f"4 epochs cost clm {share:+.1%}"
        figure = (
            f"{FREE_EPOCHS} epochs of {budget // FREE_EPOCHS:,} tokens against 1 of {budget:,} at w{best.width}: "
            f"{statistics.fmean(verdict_diffs):+.4f} nats [{low:+.4f}, {high:+.4f}] ({share:+.2%}), margin "
            f"±{margin:.4f}"
        )
    claim = judge(claim_name, evidence, figure, conditions, why)
    header = [
        "objective",
        "width",
        f"1 epoch of {budget:,} (nats)",
        f"{FREE_EPOCHS} epochs of {budget // 4:,}",
        "difference [95% t, paired by seed]",
        "share of the 1-epoch loss",
        "1% margin",
        "reads",
    ]
    note = (
        f"The same compute (D = {budget:,} tokens) spent once over D unique tokens or {FREE_EPOCHS} times over "
        f"D/{FREE_EPOCHS}. The verdict is read at w{best.width}, the rung nearest the budget's compute-optimal "
        f"size ({optimal_parameters(budget):,.0f} parameters at {TOKENS_PER_PARAMETER:g} tokens a parameter)."
    )
    return {"claim": claim, "section": "\n".join(markdown_table(header, rows)) + "\n\n" + note, "share": headline}


def _free_conditions(grid: RepetitionGrid, budget: int, best: Shape) -> list[Condition]:
    ratio = best.parameters / optimal_parameters(budget)
    return [
        parameters_condition(grid.ladder, PAPER_PARAMETERS[0], "the paper's smallest model"),
        Condition(
            "a compute-optimal rung at the compared budget",
            f"Figure 3's models are compute-optimal for their budget ({TOKENS_PER_PARAMETER:g} tokens a parameter)",
            f"w{best.width}: {budget / best.parameters:.3g} tokens a parameter ({ratio:.2g}x the optimal size)",
            1 / OPTIMAL_FACTOR <= ratio <= OPTIMAL_FACTOR,
        ),
        loss_condition(grid.corpus, AR),
    ]


def _free_row(objective: str, shape: Shape, diffs: list[float], singles: list[float], best: bool) -> list[str]:
    width = f"w{shape.width}" + (" (compute-optimal)" if best else "")
    if not diffs:
        return [objective, width, "—", "—", "—", "—", "—", "no runs"]
    span = seed_interval(diffs)
    mean, base = statistics.fmean(diffs), statistics.fmean(singles)
    margin = FREE_MARGIN * base
    low, high = span if span is not None else (math.nan, math.nan)
    reads = {Evidence.shows: "nearly free", Evidence.contradicts: "costs over 1%", Evidence.undecided: "cannot tell"}
    return [
        objective,
        width,
        f"{base:.4f}",
        f"{base + mean:.4f}",
        f"{mean:+.4f} [{low:+.4f}, {high:+.4f}]" if span else f"{mean:+.4f} (one seed)",
        f"{mean / base:+.2%}",
        f"±{margin:.4f}",
        reads[within_margin(low, high, margin)],
    ]


def _is(run: PlannedRun, objective: str, shape: Shape, unique: int, epochs: float) -> bool:
    """Whether `run` is `objective`'s run of `shape` over `unique` tokens at `epochs`."""
    cell = (run.labels["objective"], run.labels["width"], run.labels["unique"], run.labels["epochs"])
    return cell == (objective, shape.width, unique, epochs)
