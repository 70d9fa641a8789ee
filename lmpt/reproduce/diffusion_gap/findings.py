"""What the diffusion-gap grid finds, judged by lmpt.reproduce.verdict: per size, "the gap narrows as tokens grow"
(the interval of the seeds' slopes below 0) and "mdlm matches clm at about 16x the compute" (Nie et al. 2024, within
a factor of ABOUT), beside the conditions they depend on, computed from the grid."""

from __future__ import annotations

import math

from lmpt.objectives.mdlm import MdlmConfig
from lmpt.reproduce.diffusion_gap.gap import PAPER_PERPLEXITY, Cell, Pairs, multipliers, paper_slope
from lmpt.reproduce.diffusion_gap.plan import LAPTOP_EVAL_DRAWS, LR_SWEEP, OBJECTIVES, PAPER_VOCAB, SEQ_LEN, GapGrid
from lmpt.reproduce.figures import count_text, interval, missing_text
from lmpt.reproduce.ladder import TOKENS_PER_PARAMETER, Shape
from lmpt.reproduce.reproduction import Scale
from lmpt.reproduce.verdict import ClaimVerdict, Condition, Evidence, below, judge, within_margin

PAPER_PARAMETERS = 110e6
"""Sahoo et al.'s LM1B models: about 110M parameters (12 blocks of width 768, bert-base-uncased's embedding)."""
PAPER_NON_EMBEDDING = 12 * 12 * 768**2
"""Their blocks' matrices: 12 blocks of 4 d^2 (attention) and 8 d^2 (a 4 d feed-forward) at d = 768."""
NIE_MULTIPLIER = 16.0
"""Nie et al. 2024: masked diffusion needs about 16 times autoregression's compute for the same validation loss."""
ABOUT = 2.0
""""About 16 times": within a factor of 2 (8x to 32x)."""
NEEDS = (
    "non-embedding parameters",
    "training tokens",
    "tokens per parameter (compute-optimal: about 20)",
    "learning rate",
)
"""The conditions both claims depend on (the multiplier's also on the sizing)."""


def narrowing_claim(label: str, slopes: list[float], missing: list[str], needs: list[Condition]) -> ClaimVerdict:
    """The gap narrows at one size: the interval of the seeds' slopes (gap.slope) below 0."""
    claim = f"the gap narrows as tokens grow ({label})"
    if missing:
        return judge(claim, Evidence.missing, "", needs, missing_text(missing))
    mean, low, high = interval(slopes)
    span = f"[{low:+.2f}, {high:+.2f}]" if len(slopes) > 1 else "(one seed: no interval)"
    figure = f"relative gap {mean:+.2f} points per tenfold tokens {span}"
    return judge(claim, below(low, high, 0.0), figure, needs, f"the paper's {paper_slope():+.2f} points")


def multiplier_claim(
    grid: GapGrid, label: str, cells: dict[int, Pairs], missing: list[str], needs: list[Condition]
) -> ClaimVerdict:
    """Nie et al.'s claim at one size, from clm's smallest budget: about 16x, within a factor of ABOUT, read off
    the interval of the log multiplier over seeds (beyond the grid: above the grid's reach)."""
    claim = f"mdlm matches clm at about {NIE_MULTIPLIER:g}x the compute ({label})"
    if missing:
        return judge(claim, Evidence.missing, "", needs, missing_text(missing))
    found, reach, figure = multipliers(grid, cells, grid.tokens[0])
    reached = [math.log(m / NIE_MULTIPLIER) for m in found if m is not None]
    if len(reached) == len(found):
        _, low, high = interval(reached)
        evidence = within_margin(low, high, math.log(ABOUT))
    elif not reached and reach > ABOUT * NIE_MULTIPLIER:
        evidence = Evidence.contradicts  # more than the grid's reach, past "about 16x" for every seed
    else:
        evidence = Evidence.undecided
    return judge(claim, evidence, figure, needs, f"about: {NIE_MULTIPLIER / ABOUT:g}x to {NIE_MULTIPLIER * ABOUT:g}x")


def sweep_edges(best: dict[tuple[str, int, str], Cell]) -> list[str]:
    """The cells whose best factor may lie beyond their sweep (Cell.at_an_end)."""
    return [f"{label} {count_text(t)} {o} {cell.best:g}x" for (label, t, o), cell in best.items() if cell.at_an_end]


def conditions(grid: GapGrid, best: dict[tuple[str, int, str], Cell]) -> list[Condition]:
    """The conditions table, the paper's value beside the grid's (computed from the grid and the sweep's best cells)."""
    params = [s.parameters for s in grid.ladder]
    inner = [s.matmul_parameters for s in grid.ladder]
    lo_t, hi_t = min(PAPER_PERPLEXITY), max(PAPER_PERPLEXITY)
    per_param = "; ".join(
        f"{s.label} {grid.tokens[0] / s.parameters:.2g} to {grid.tokens[-1] / s.parameters:.2g}" for s in grid.ladder
    )
    trained = all(grid.tokens[-1] >= TOKENS_PER_PARAMETER * p for p in params)
    draws = LAPTOP_EVAL_DRAWS if grid.scale is Scale.laptop else MdlmConfig.eval_draws
    windows = grid.steps[-1] * grid.recipe.batch * (SEQ_LEN + 1)
    if grid.recipe.sweep:
        edges = sweep_edges(best)
        chosen = all(cell.best is not None for cell in best.values())
        sweeps = ", ".join(f"{o} " + "/".join(f"{f:g}" for f in LR_SWEEP[o]) for o in OBJECTIVES)
        rate = (
            f"each its own, the best of {sweeps}x Muon's defaults in every cell; at an end of its sweep in "
            f"{len(edges)} of {len(best)} cells"
        )
        rate_met = (not edges) if chosen else None
    else:
        rate, rate_met = "the paper's, one for both", None
    return [
        Condition("parameters", f"about {count_text(PAPER_PARAMETERS)}", _sizes(grid.ladder, params), None),
        Condition(
            "non-embedding parameters",
            f"about {count_text(PAPER_NON_EMBEDDING)}",
            _sizes(grid.ladder, inner),
            max(inner) >= PAPER_NON_EMBEDDING / 2,
        ),
        Condition(
            "training tokens",
            f"{count_text(lo_t)} and {count_text(hi_t)}",
            f"{count_text(grid.tokens[0])} to {count_text(grid.tokens[-1])} ({len(grid.tokens)} budgets)",
            grid.tokens[-1] >= lo_t,
        ),
        Condition(
            "tokens per parameter (compute-optimal: about 20)",
            f"{lo_t / PAPER_PARAMETERS:,.0f} to {hi_t / PAPER_PARAMETERS:,.0f}: far past compute-optimal",
            per_param,
            trained,
            "" if trained else "no model is trained to compute-optimal at the largest budget",
        ),
        Condition("vocabulary", f"{PAPER_VOCAB:,} (bert-base-uncased)", f"{grid.recipe.vocab:,}", None),
        Condition("context length", "128 tokens", f"{SEQ_LEN} tokens", SEQ_LEN == 128),
        Condition(
            "documents",
            "LM1B's sentences (about 27 words), one an example, padded to 128",
            f"the documents of corpus={grid.corpus} packed into {SEQ_LEN}-token windows, eos between",
            None,
        ),
        Condition(
            "passes over the text",
            "many: LM1B holds about 0.8B words",
            f"one: every run draws from the first {grid.unique_tokens:,} tokens, the largest budget reads its "
            f"{windows:,} windowed tokens once",
            None,
            "repetition cannot enter the gap",
        ),
        Condition(
            "recipe",
            "AdamW 3e-4, constant after 2,500 warm-up steps, dropout 0.1, EMA 0.9999, batch 512 x 128",
            grid.recipe.words,
            None,
        ),
        Condition("learning rate", "one for both (3e-4)", rate, rate_met),
        Condition(
            "what the loss is measured on",
            "LM1B's test set: AR exact, MDLM its ELBO bound",
            f"the same held-out windows, bits per token: clm exact, mdlm its bound ({draws} fixed draws of masks)",
            True,
        ),
        Condition(
            "sizing",
            "Nie et al.: compute-optimal frontiers over model sizes",
            f"{len(grid.ladder)} fixed size(s), a curve each",
            False,
            "a multiplier at one size, not on a frontier",
        ),
    ]


def _sizes(ladder: list[Shape], counts: list[int]) -> str:
    return ", ".join(f"{s.label} {count_text(n)}" for s, n in zip(ladder, counts, strict=True))
