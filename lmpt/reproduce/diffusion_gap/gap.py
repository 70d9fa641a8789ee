"""Masked diffusion's likelihood gap to autoregression and its measures. Both objectives are measured on the same
held-out windows in bits per token: clm's exact negative log-likelihood, mdlm's diffusion bound (an upper bound on its
own); clm and mdlm of one seed read the same text, so the gap is paired by seed.

What is measured, per size and budget: the gap mdlm - clm in bits per token and relative to clm's figure, with 95% t
intervals over seeds; per size, whether it narrows (each seed's least-squares slope of the relative gap against log10
tokens, the slopes' interval: below 0 shows narrowing); and the compute multiplier at which mdlm's bound reaches
clm's figure at the smallest budget (mdlm's curve interpolated in log tokens: at one model size the ratio of 6ND
compute), "beyond the grid" when it never does. Each (size, budget, objective) is a Cell of its learning-rate sweep:
its figure is its best factor's, and it names whether that best may lie beyond the sweep (`Cell.at_an_end`)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from lmpt.downstream.significance import seed_interval
from lmpt.objectives.yardstick import BITS_PER_TOKEN
from lmpt.reproduce.diffusion_gap.plan import OBJECTIVES, GapGrid
from lmpt.reproduce.figures import interval
from lmpt.reproduce.reproduction import AR, DIFFUSION, FinishedRun

PAPER_PERPLEXITY = {33e9: {AR: 22.32, DIFFUSION: 27.04}, 327e9: {AR: 20.86, DIFFUSION: 23.00}}
"""LM1B test perplexity at 33B and 327B training tokens (Sahoo et al. 2024, Table 1: their retrained autoregressive
transformer, and MDLM's bound)."""


def paper_gap(tokens: float) -> tuple[float, float]:
    """The paper's (gap in bits per token, gap relative to AR's bits) at `tokens`."""
    ar, mdlm = (math.log2(PAPER_PERPLEXITY[tokens][o]) for o in OBJECTIVES)
    return mdlm - ar, (mdlm - ar) / ar


def paper_slope() -> float:
    """The paper's relative gap (in bits), its change per tenfold tokens between its two budgets (% points)."""
    t0, t1 = sorted(PAPER_PERPLEXITY)
    return 100 * (paper_gap(t1)[1] - paper_gap(t0)[1]) / math.log10(t1 / t0)


def slope(tokens: Sequence[float], relative: Sequence[float]) -> float:
    """Least-squares slope of the relative gap (% points) against log10 tokens."""
    return float(np.polyfit(np.log10(np.asarray(tokens, dtype=float)), 100 * np.asarray(relative), 1)[0])


def multiplier(target: float, tokens: Sequence[float], curve: Sequence[float]) -> float | None:
    """The tokens at which `curve` (mdlm's bits at each of `tokens`, ascending) first reaches `target`, over the
    smallest of `tokens`, interpolated linearly in log tokens; 1 when it is there at the smallest, None when it never
    is inside the grid."""
    if curve[0] <= target:
        return 1.0
    for i in range(1, len(tokens)):
        if curve[i] <= target:
            share = (curve[i - 1] - target) / (curve[i - 1] - curve[i])
            return math.exp(share * math.log(tokens[i] / tokens[i - 1])) * tokens[i - 1] / tokens[0]
    return None


Bits = dict[tuple[str, int, str, float | None, int], float]
"""(size, tokens, objective, factor, seed) -> held-out bits per token of a completed run."""


@dataclass(frozen=True)
class Cell:
    """One size, budget and objective: each factor's held-out figure by seed (a factor of None: the recipe's one
    learning rate), and the best factor, the lowest mean over the seeds it has."""

    by_factor: dict[float | None, dict[int, float]]

    @property
    def best(self) -> float | None:
        done = {f: seeds for f, seeds in self.by_factor.items() if seeds}
        return min(done, key=lambda f: statistics.fmean(done[f].values())) if done else None

    @property
    def figures(self) -> dict[int, float]:
        """The best factor's figure by seed (empty: no run completed)."""
        return self.by_factor[self.best] if self.by_factor and self.best in self.by_factor else {}

    @property
    def at_an_end(self) -> bool:
        """The best factor is an end of the sweep and beats its neighbour with a paired 95% interval over seeds
        below 0 (or with no interval, one seed): the best may lie beyond. A best at an end by no more than the seeds'
        spread, as where a model has not yet left predicting each token's frequency, is not."""
        factors = sorted(f for f in self.by_factor if f is not None)
        best = self.best
        if len(factors) < 2 or best not in (factors[0], factors[-1]):
            return False
        neighbour = self.by_factor[factors[1] if best == factors[0] else factors[-2]]
        differences = [v - neighbour[s] for s, v in self.by_factor[best].items() if s in neighbour]
        span = seed_interval(differences)
        return span is None or span[1] < 0


Pairs = dict[int, tuple[float, float]]
"""seed -> (clm's bits, mdlm's bits) of one size and budget, each at its cell's best factor."""


def run_key(labels: dict) -> tuple:
    return (labels["model"], labels["tokens"], labels["objective"], labels["factor"], labels["seed"])


def held_out_bits(finished: list[FinishedRun]) -> Bits:
    """Every completed run's held-out bits per token (a run without a finite figure is left out)."""
    found = {run_key(run.planned.labels): run.last(BITS_PER_TOKEN) for run in finished}
    return {key: value for key, value in found.items() if math.isfinite(value)}


def paired(ar: dict[int, float], diffusion: dict[int, float]) -> Pairs:
    return {s: (ar[s], diffusion[s]) for s in sorted(ar) if s in diffusion}


def relative_gap(ar: float, diffusion: float) -> float:
    return (diffusion - ar) / ar


def multipliers(grid: GapGrid, cells: dict[int, Pairs], tokens: int) -> tuple[list[float | None], float, str]:
    """Each seed's multiplier from clm's figure at `tokens` along its mdlm curve from there on (None: beyond the
    grid), the grid's reach from `tokens`, and the figure in words: the geometric mean with its 95% t interval."""
    later = [t for t in grid.tokens if t >= tokens]
    seeds = [s for s in range(grid.seeds) if all(s in cells[t] for t in later)]
    found = [multiplier(cells[tokens][s][0], later, [cells[t][s][1] for t in later]) for s in seeds]
    reach = later[-1] / tokens
    reached = [math.log(m) for m in found if m is not None]
    if not found:
        return found, reach, "—"
    if len(reached) < len(found):
        return found, reach, f"beyond the grid's {reach:g}x for {len(found) - len(reached)} of {len(found)} seeds"
    mean, low, high = interval(reached)
    span = f" [{math.exp(low):.2f}, {math.exp(high):.2f}]" if math.isfinite(low) else " (one seed: no interval)"
    return found, reach, f"{math.exp(mean):.2f}x{span}"
