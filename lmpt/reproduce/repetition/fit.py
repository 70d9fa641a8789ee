"""Each objective's fit of the data-constrained law (lmpt.reproduce.data_constrained_law) to the repetition grid's
runs, as Muennighoff et al.'s notebook fits it, and the constants as the document writes them.

A run's loss is its held-out loss in nats a token on the same windows for every run (val_bits_per_token x ln 2): exact
for clm, the diffusion bound for mdlm (an upper bound on its negative log-likelihood). Stage 1 (Chinchilla's E +
A/N^alpha + B/D^beta, the part Chinchilla's C4 points play in the notebook) is fitted through the single-epoch runs,
which the grid keeps at most the compute-optimal size so that none loses to excess parameters; stage 2 fits R_D* and
R_N* over every run. Which runs enter the fit is `include_points`'s rule: a run whose loss is not finite or is at or
above ln V (a uniform guess over the vocabulary) diverged and is left out, and listed with its reason; the notebook's
other removals (runs whose loss rose with more epochs among them) are a hand-made list, not a rule, so lmpt keeps those
runs and says so. The 95% intervals of R_D* and R_N* are a percentile bootstrap over seeds, each cell's seeds drawn
again and both stages refitted (`bootstrap_stars`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from lmpt.errors import LmptError
from lmpt.objectives.yardstick import BITS_PER_TOKEN
from lmpt.reproduce.data_constrained_law import (
    PAPER_LAW,
    R_STAR_BOUNDS,
    DataConstrainedLaw,
    Decay,
    LossPoint,
    StarIntervals,
    bootstrap_stars,
    fit_base_law,
    fit_law,
    include_points,
)
from lmpt.reproduce.reproduction import FinishedRun, PlannedRun

BOOTSTRAP = 199
"""Resamples of the seed bootstrap (each refits both stages)."""
FIT_STARTS: int | None = None
"""Stage 1's starts for the point fits (None: every start of the notebook's grid)."""


@dataclass
class Fitted:
    """One objective's fit: the runs in it and those left out (with the reason), the planned runs not completed,
    the law with both decays and with data's alone, and their bootstrap intervals."""

    objective: str
    kept: list[LossPoint]
    left_out: list[tuple[LossPoint, str]]
    missing: list[str]
    both: DataConstrainedLaw | None = None
    data: DataConstrainedLaw | None = None
    both_ci: StarIntervals | None = None
    data_ci: StarIntervals | None = None
    notes: list[str] = field(default_factory=list)
    """Why a fit or an interval is absent."""


def fit(objective: str, points: list[LossPoint], missing: list[str], vocab: int) -> Fitted:
    """`objective`'s fit through its runs' `points` (those `include_points` keeps at a `vocab`-piece vocabulary):
    stage 1, then each decay with its bootstrap interval; a fit that fails is a note."""
    kept, left_out = include_points(points, vocab_size=vocab)
    fitted = Fitted(objective, kept, left_out, missing)
    try:
        base = fit_base_law(kept, starts=FIT_STARTS)  # stage 1, the same for both fits
    except LmptError as exc:
        fitted.notes.append(f"no fit: {exc}")
        return fitted
    for decay in Decay:
        try:
            setattr(fitted, decay.value, fit_law(kept, decay=decay, base=base))
            ci = bootstrap_stars(kept, decay=decay, resamples=BOOTSTRAP)
            setattr(fitted, f"{decay.value}_ci", ci)
        except LmptError as exc:
            fitted.notes.append(f"{decay} decay: {exc}")
    return fitted


def recover_constants(law: DataConstrainedLaw | None, planned: list[PlannedRun]) -> tuple[float, float] | None:
    """R_D* and R_N* fitted as the runs are (stage 1, then both decays) to losses the law makes, clm's fitted stage 1
    with the paper's R_D* and R_N*, at every cell of the grid: whether the grid can give the constants back at all."""
    if law is None:
        return None
    made = replace(law, r_d_star=PAPER_LAW.r_d_star, r_n_star=PAPER_LAW.r_n_star)
    cells = {(r.labels["parameters"], r.labels["tokens"], r.labels["seen"]) for r in planned}
    points = [LossPoint(n, d, u, float(made.predict(n, d, u))) for n, d, u in sorted(cells)]
    try:
        found = fit_law(points, starts=FIT_STARTS)
    except LmptError:
        return None
    return found.r_d_star, found.r_n_star


def point(run: FinishedRun) -> LossPoint:
    """A completed run as the fit reads it: its parameters, tokens, unique tokens read and held-out nats."""
    labels = run.planned.labels
    return LossPoint(
        float(labels["parameters"]),
        float(labels["tokens"]),
        float(labels["seen"]),
        held_out_nats(run),
        seed=int(labels["seed"]),
        objective=str(labels["objective"]),
        name=run.planned.name,
    )


def held_out_nats(run: FinishedRun) -> float:
    """The run's held-out loss in nats a token (its last val_bits_per_token x ln 2; NaN when never logged)."""
    return run.last(BITS_PER_TOKEN) * math.log(2)


def star_interval(fitted: Fitted, decay: Decay, star: str) -> tuple[float, float]:
    """The bootstrap interval of `star` (r_d_star or r_n_star) in `decay`'s fit (NaN ends without one)."""
    ci = fitted.both_ci if decay is Decay.both else fitted.data_ci
    span = None if ci is None else (ci.r_d_star if star == "r_d_star" else ci.r_n_star)
    return span if span is not None else (math.nan, math.nan)


def _star_text(value: float) -> str:
    if value >= 0.99 * R_STAR_BOUNDS[1]:
        return f"≥ {R_STAR_BOUNDS[1]:,.0f}"
    if value <= 1.01 * R_STAR_BOUNDS[0]:
        return f"≤ {R_STAR_BOUNDS[0]:g}"
    return f"{value:.3g}"


def star_figure(fitted: Fitted, star: str, decay: Decay = Decay.both) -> str:
    """`star` as fitted with its interval, 'VALUE [LOW, HIGH]' (an end at the search's bound written as one)."""
    law = fitted.both if decay is Decay.both else fitted.data
    if law is None:
        return "—"
    low, high = star_interval(fitted, decay, star)
    value = _star_text(getattr(law, star))
    return value if math.isnan(low) else f"{value} [{_star_text(low)}, {_star_text(high)}]"
