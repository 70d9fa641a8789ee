"""Frontiers and crossings, as Prabhudesai et al. 2025's Figure 1 draws them: at each compute, the best held-out loss of
any model size and epoch count trained with at most that compute; the compute from which masked diffusion's frontier
stays below autoregression's (the crossing), beside the paper's law C_crit(U) = 2.12e15 (U / 1e6)^2.174 FLOPs; a
power law through crossings at several U; and their statistics over seeds.

Every run is ranked by held-out bits per token on the same windows: exact for clm, the diffusion bound for mdlm (an
upper bound, so a crossing found with it is one the exact likelihood would find no later)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lmpt.downstream.significance import seed_interval
from lmpt.objectives.yardstick import BITS_PER_TOKEN
from lmpt.reproduce.reproduction import AR, DIFFUSION, FinishedRun, PlannedRun

LAW = (2.12e15, 2.174)
"""C_crit(U) = a (U / 1e6)^k FLOPs in 6 N D (Prabhudesai et al. 2025, the project page's linear fit of critical
compute)."""


def law(unique: float) -> float:
    """The paper's critical compute (6 N D) at `unique` tokens."""
    return LAW[0] * (unique / 1e6) ** LAW[1]


def frontier(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """The lower envelope of (compute, bits) points: at each point's compute, the best bits of any point with at most
    that compute (a step down where a run improves on every cheaper one)."""
    steps: list[tuple[float, float]] = []
    for flops, bits in sorted(points):
        if not steps or bits < steps[-1][1]:
            steps.append((flops, bits))
    return steps


def first_crossing(diffusion: list[tuple[float, float]], autoregressive: list[tuple[float, float]]) -> float | None:
    """The compute from which the diffusion frontier lies below the autoregressive one to the end of the grid: where
    diffusion overtakes for good (None: autoregression leads at the grid's largest compute). A lead diffusion takes
    among the cheapest runs and loses again (runs of a few steps, neither model trained) is not a crossing."""
    if not diffusion or not autoregressive:
        return None
    since = None
    for flops in sorted({f for f, _ in diffusion} | {f for f, _ in autoregressive}):
        a = [b for f, b in autoregressive if f <= flops]
        d = [b for f, b in diffusion if f <= flops]
        ahead = bool(a and d and min(d) < min(a))
        since = (since if since is not None else flops) if ahead else None
    return since


def final_gap(diffusion: list[tuple[float, float]], autoregressive: list[tuple[float, float]]) -> float:
    """Diffusion's best minus autoregression's best over the whole grid (negative: diffusion ahead at the end)."""
    return min(b for _, b in diffusion) - min(b for _, b in autoregressive)


def power_law(crossings: dict[int, float]) -> tuple[float, float] | None:
    """(a, k) of C = a (U / 1e6)^k through the crossings (least squares in logs); None with fewer than two."""
    if len(crossings) < 2:
        return None
    x = np.log(np.array(list(crossings)) / 1e6)
    y = np.log(np.array(list(crossings.values())))
    k, log_a = np.polyfit(x, y, 1)
    return float(math.exp(log_a)), float(k)


def log_interval(values: list[float]) -> tuple[float, float] | None:
    """95% t interval over seeds of the geometric mean of `values` (in their units); None with fewer than two."""
    span = seed_interval([math.log(v) for v in values])
    return None if span is None else (math.exp(span[0]), math.exp(span[1]))


def too_wide(values: list[float], span: tuple[float, float], geometric: bool = False) -> str:
    """A note where two seeds' t interval (1 degree of freedom: 12.7 standard errors either side) is wider than the
    value it brackets, which is then no verdict's basis; empty otherwise."""
    centre = math.exp(statistics.fmean(math.log(v) for v in values)) if geometric else statistics.fmean(values)
    if len(values) != 2 or span[1] - span[0] <= abs(centre):
        return ""
    return (
        f"2 seeds: the t interval [{span[0]:.3g}, {span[1]:.3g}] (1 degree of freedom) is wider than the value "
        f"{centre:.3g}, no basis for a verdict; run seeds=3"
    )


@dataclass
class Cell:
    """One (U, objective, width, epochs) of the grid: its plan and each seed's figures."""

    planned: list[PlannedRun]
    bits: dict[int, float] = field(default_factory=dict)
    """Held-out bits per token by seed (NaN: the run completed without a finite figure)."""
    flops: dict[int, float] = field(default_factory=dict)
    """lmpt's logged training FLOPs by seed."""

    @property
    def labels(self) -> dict[str, Any]:
        return self.planned[0].labels

    @property
    def paper_flops(self) -> float:
        return self.planned[0].paper_flops

    def finite(self) -> dict[int, float]:
        return {s: b for s, b in self.bits.items() if math.isfinite(b)}


@dataclass
class AtUnique:
    """What the grid shows at one count of unique tokens."""

    unique: int
    cells: list[Cell]
    missing: list[str]
    """The planned runs at this U not completed."""
    seeds: int

    @property
    def law(self) -> float:
        return law(self.unique)

    @property
    def reach(self) -> float:
        """The largest 6 N D of its completed runs, in multiples of C_crit(U)."""
        done = [c.paper_flops for c in self.cells if c.bits]
        return max(done, default=0.0) / self.law

    def means(self, objective: str, axis: str = "paper") -> list[tuple[float, float]]:
        """(compute, mean bits over seeds) of each cell with a finite figure; compute in 6 N D or lmpt's (logged)."""
        points = []
        for cell in self.cells:
            finite = cell.finite()
            if cell.labels["objective"] != objective or not finite:
                continue
            logged = [cell.flops[s] for s in finite if math.isfinite(cell.flops.get(s, math.nan))]
            if axis == "paper":
                points.append((cell.paper_flops, statistics.fmean(finite.values())))
            elif logged:
                points.append((statistics.fmean(logged), statistics.fmean(finite.values())))
        return points

    def seed_points(self, objective: str, seed: int) -> list[tuple[float, float]]:
        return [
            (c.paper_flops, c.bits[seed])
            for c in self.cells
            if c.labels["objective"] == objective and math.isfinite(c.bits.get(seed, math.nan))
        ]

    def crossing(self, axis: str = "paper") -> float | None:
        """The seed means' crossing, in 6 N D (or lmpt's count)."""
        return first_crossing(frontier(self.means(DIFFUSION, axis)), frontier(self.means(AR, axis)))

    def seed_crossings(self) -> list[float | None]:
        """Each seed's crossing in 6 N D (None: its frontiers do not cross)."""
        return [
            first_crossing(frontier(self.seed_points(DIFFUSION, s)), frontier(self.seed_points(AR, s)))
            for s in range(self.seeds)
        ]

    def gaps(self) -> list[float]:
        """Each seed's mdlm best minus clm best over the grid."""
        gaps = []
        for s in range(self.seeds):
            fronts = [frontier(self.seed_points(o, s)) for o in (DIFFUSION, AR)]
            if all(fronts):
                gaps.append(final_gap(*fronts))
        return gaps


def at_unique(unique: int, planned: list[PlannedRun], finished: list[FinishedRun], seeds: int) -> AtUnique:
    """What the grid's completed runs show at `unique` tokens: its cells, each seed's figures, the runs missing."""
    cells: dict[tuple, Cell] = {}
    for run in planned:
        labels = run.labels
        if labels["unique"] == unique:
            key = (labels["objective"], labels["width"], labels["epochs"])
            cells.setdefault(key, Cell([])).planned.append(run)
    done = set()
    for completed in finished:
        labels = completed.planned.labels
        cell = cells.get((labels["objective"], labels["width"], labels["epochs"]))
        if labels["unique"] == unique and cell is not None:
            cell.bits[labels["seed"]] = completed.last(BITS_PER_TOKEN)
            cell.flops[labels["seed"]] = completed.last("flops")
            done.add(completed.planned.name)
    missing = [r.name for c in cells.values() for r in c.planned if r.name not in done]
    return AtUnique(unique, list(cells.values()), missing, seeds)
