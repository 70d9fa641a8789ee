"""Where a bound overtakes an exact likelihood as the budget grows: the data-constrained comparison of masked diffusion
and autoregression (Prabhudesai et al. 2025, "Diffusion Beats Autoregressive in Data-Constrained Settings").

Runs that report held-out bits per token on the same windows (val_bits_per_token: exact for clm, an upper bound for
mdlm) are grouped into lines, one per objective and count of unique training tokens (data.unique_tokens), a point per
budget with its mean over seeds and 95% t interval. Per count of unique tokens:
- the exact-likelihood line's best budget (lowest mean), where more passes over the same text stop paying;
- the first budget at which a bound's mean falls below that best, with Welch's 95% interval of the difference over
  seeds, or, when none does, the training FLOPs at which the bound's trend over its last budgets (a line in log
  FLOPs) would reach it.

draw_crossover plots them: bits per token against training FLOPs (log), one line per objective and count, the exact
line's best starred and each crossover marked."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from lmpt.downstream.significance import seed_interval
from lmpt.report.ranking import BITS_PER_TOKEN, is_bound, on_bits_axis
from lmpt.report.runs import RunSummary

if TYPE_CHECKING:
    from matplotlib.figure import Figure

CROSSOVER_PLOT = "crossover.png"
TREND_POINTS = 3
"""The last budgets of a bound's line its trend is fitted over, when it has not crossed yet."""


@dataclass(frozen=True)
class Point:
    """One budget of one line: the runs' held-out bits per token over seeds, at their mean training FLOPs."""

    budget: str
    flops: float
    epochs: float | None
    bits: tuple[float, ...]
    """Per seed."""

    @property
    def mean(self) -> float:
        return float(np.mean(self.bits))

    @property
    def interval(self) -> tuple[float, float] | None:
        return seed_interval(self.bits)


@dataclass(frozen=True)
class Line:
    objective: str
    model: str | None
    """model.name, as the line is labelled."""
    unique_tokens: int | None
    bound: bool
    """True when the figure is an upper bound on the negative log-likelihood (mdlm), False when exact (clm)."""
    points: tuple[Point, ...]
    """By training FLOPs, smallest first."""
    shape: str | None = None
    """The model's shape (RunSummary.shape): lines of different sizes are never pooled, even under one name."""

    @property
    def label(self) -> str:
        data = f"{self.unique_tokens:,} unique tokens" if self.unique_tokens else "all the training text"
        model = f", model={self.model}" if self.model else ""
        return f"{self.objective} ({'bound' if self.bound else 'exact'}), {data}{model}"

    def best(self) -> Point:
        return min(self.points, key=lambda p: p.mean)


@dataclass(frozen=True)
class Crossover:
    """A bound's line against the exact line at one count of unique tokens."""

    exact: Line
    bound: Line
    below: Point | None
    """The bound's first budget whose mean is below the exact line's best; None when no budget's is."""
    difference: tuple[float, float, float] | None
    """The bound at `below` minus the exact best: mean difference and Welch's 95% interval over seeds (None with
    fewer than two seeds on a side)."""
    projected_flops: float | None
    """With no crossover: the training FLOPs at which the bound's trend reaches the exact best (None when the trend
    does not fall)."""

    def sentence(self) -> str:
        """The finding in words, as measured."""
        best = self.exact.best()
        data = f"{self.exact.unique_tokens:,} unique tokens" if self.exact.unique_tokens else "the whole training text"
        data += f" (model={self.exact.model})" if self.exact.model else ""
        head = (
            f"At {data}, {self.exact.objective} is best at {best.budget} ({_flops(best.flops)} FLOPs"
            f"{_epochs(best)}): {best.mean:.3f} bits per token"
        )
        if self.below is not None:
            diff = ""
            if self.difference is not None:
                mean, low, high = self.difference
                diff = f"; {self.bound.objective} minus that best: {mean:+.3f} bits [95%: {low:+.3f}, {high:+.3f}]"
            return (
                f"{head}. {self.bound.objective}'s bound falls below it at {self.below.budget} "
                f"({_flops(self.below.flops)} FLOPs{_epochs(self.below)}): {self.below.mean:.3f}{diff}."
            )
        lowest = self.bound.best()
        if self.projected_flops:
            tail = (
                f"; its trend over its last {TREND_POINTS} budgets would reach it at about "
                f"{_flops(self.projected_flops)} FLOPs"
            )
        elif self.bound.points[-1] is not lowest:
            rest = f"so more compute does not bring it down to {self.exact.objective}'s best"
            last = self.bound.points[-1]
            tail = f"; past {lowest.budget} it falls no further ({last.mean:.3f} at {last.budget}), {rest}"
        else:
            tail = "; its trend does not fall"
        return (
            f"{head}. {self.bound.objective}'s bound stays above it at every budget (lowest "
            f"{lowest.mean:.3f} at {lowest.budget}){tail}."
        )


def _flops(flops: float | None) -> str:
    return f"{flops:.2e}" if flops is not None else "?"


def _epochs(point: Point) -> str:
    return f", {point.epochs:.1f} epochs" if point.epochs is not None else ""


def crossover_lines(runs: list[RunSummary]) -> list[Line]:
    """The completed likelihood runs with held-out bits per token, grouped into lines by objective, model shape and
    unique tokens, a point per trainer.budget (seeds pooled). A run without trainer.budget is on no budget axis and is
    left out: seeds or unrelated runs are never read as budgets (nor sizes that share a name as one model)."""
    groups: dict[tuple[str, str | None, int | None], dict[str, list[RunSummary]]] = defaultdict(
        lambda: defaultdict(list)
    )
    names: dict[str | None, str | None] = {}
    for run in runs:
        bits = run.measures.get(BITS_PER_TOKEN)
        if run.status != "completed" or bits is None or run.flops is None or not on_bits_axis(run.objective):
            continue
        if not math.isfinite(float(bits)):  # a diverged run's figure feeds no trend
            continue
        if run.budget is None:
            continue
        groups[(str(run.objective), run.shape or run.model, run.unique_tokens)][run.budget].append(run)
        names[run.shape or run.model] = run.model
    lines = []
    for (objective, shape, unique), by_budget in groups.items():
        points = [
            Point(
                budget,
                float(np.mean([r.flops for r in members])),
                float(np.mean([r.epochs for r in members])) if all(r.epochs is not None for r in members) else None,
                tuple(float(r.measures[BITS_PER_TOKEN]) for r in members),
            )
            for budget, members in by_budget.items()
        ]
        points.sort(key=lambda p: p.flops)
        lines.append(Line(objective, names[shape], unique, is_bound(objective), tuple(points), shape))
    return sorted(lines, key=lambda line: (line.model or "", line.unique_tokens or 0, line.bound, line.objective))


def find_crossovers(lines: list[Line]) -> list[Crossover]:
    """Each bound line against the exact line of its model at its count of unique tokens (none where either is
    missing)."""
    exact = {(line.shape, line.unique_tokens): line for line in lines if not line.bound}
    found = []
    for bound in (line for line in lines if line.bound):
        ref = exact.get((bound.shape, bound.unique_tokens))
        if ref is None:
            continue
        best = ref.best()
        below = next((p for p in bound.points if p.mean < best.mean), None)
        difference = _difference(below.bits, best.bits) if below is not None else None
        projected = None if below is not None else _projected_flops(bound, best.mean)
        found.append(Crossover(ref, bound, below, difference, projected))
    return found


def _difference(a: tuple[float, ...], b: tuple[float, ...]) -> tuple[float, float, float] | None:
    """mean(a) - mean(b) with Welch's 95% interval (scipy), or None with fewer than two values on a side."""
    if len(a) < 2 or len(b) < 2:
        return None
    from scipy.stats import ttest_ind

    result = ttest_ind(a, b, equal_var=False)
    low, high = result.confidence_interval(0.95)
    return float(np.mean(a) - np.mean(b)), float(low), float(high)


def _projected_flops(line: Line, target: float) -> float | None:
    """Where a least-squares line through the last TREND_POINTS (mean bits, log10 FLOPs) reaches `target`; None when
    it has fewer than two points, does not fall, or the line's largest budget is not its best (the bound has turned
    up: more compute no longer brings it down)."""
    tail = line.points[-TREND_POINTS:]
    if len(tail) < 2 or line.points[-1] is not line.best():
        return None
    slope, intercept = np.polyfit([math.log10(p.flops) for p in tail], [p.mean for p in tail], 1)
    if slope >= 0:
        return None
    return float(10 ** ((target - intercept) / slope))


def plot_crossover(lines: list[Line], crossovers: list[Crossover], path: Path, title: str = "") -> bool:
    """draw_crossover written as a PNG at `path`; False (nothing written) when no line has two budgets."""
    if not any(len(line.points) > 1 for line in lines):
        return False
    figure = draw_crossover(lines, crossovers, title)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    return True


def draw_crossover(lines: list[Line], crossovers: list[Crossover], title: str = "") -> Figure:
    """Held-out bits per token against training FLOPs (log): a line per objective and count of unique tokens (solid
    exact, dashed bound; one colour per count), the seeds' 95% interval shaded, each point labelled with its epochs,
    the exact line's best starred and the bound's crossing ringed."""
    from matplotlib import colormaps
    from matplotlib.figure import Figure  # on demand: the report's tables need no matplotlib

    figure = Figure(figsize=(8.5, 5.2))
    ax = figure.subplots()
    pairs = sorted({(line.model or "", line.unique_tokens or 0) for line in lines})
    colours = {pair: colormaps["tab10"](i) for i, pair in enumerate(pairs)}
    for line in lines:
        colour = colours[(line.model or "", line.unique_tokens or 0)]
        x = [p.flops for p in line.points]
        y = [p.mean for p in line.points]
        ax.plot(x, y, "--" if line.bound else "-", marker="o", color=colour, label=line.label)
        spans = [p.interval or (p.mean, p.mean) for p in line.points]
        ax.fill_between(x, [s[0] for s in spans], [s[1] for s in spans], color=colour, alpha=0.15)
        for p in line.points:
            if p.epochs is not None:
                ax.annotate(
                    f"{p.epochs:.0f} ep",
                    (p.flops, p.mean),
                    textcoords="offset points",
                    xytext=(4, 4),
                    fontsize=7,
                    color=colour,
                )
        if not line.bound:
            best = line.best()
            ax.plot([best.flops], [best.mean], marker="*", markersize=16, color=colour, linestyle="none")
            ax.axhline(best.mean, color=colour, linewidth=0.6, alpha=0.5)
    for crossing in crossovers:
        if crossing.below is not None:
            colour = colours[(crossing.bound.model or "", crossing.bound.unique_tokens or 0)]
            ax.plot(
                [crossing.below.flops],
                [crossing.below.mean],
                marker="o",
                markersize=15,
                markerfacecolor="none",
                markeredgecolor=colour,
                markeredgewidth=2,
                linestyle="none",
            )
            ax.axvline(crossing.below.flops, color=colour, linestyle=":", linewidth=1)
    ax.set_xscale("log")
    ax.set_xlabel("training FLOPs")
    ax.set_ylabel("held-out bits per token (mdlm: upper bound)")
    ax.set_title(title or "bits per token against compute: the exact line's best starred, a bound's crossing ringed")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    figure.tight_layout()
    return figure


def report_crossover(runs: list[RunSummary], directory: Path, title: str = "") -> list[str]:
    """Where runs of an exact likelihood and a bound share held-out bits per token over two or more budgets: print
    each crossover's finding and write CROSSOVER_PLOT in `directory`; returns the sentences ([] when there is none)."""
    from lmpt.console import console

    lines = crossover_lines(runs)
    crossovers = [c for c in find_crossovers(lines) if len(c.exact.points) > 1 or len(c.bound.points) > 1]
    if not crossovers:
        return []
    sentences = [c.sentence() for c in crossovers]
    for sentence in sentences:
        console.print(sentence, markup=False)
    shown = [line for line in lines if any(line in (c.exact, c.bound) for c in crossovers)]
    if plot_crossover(shown, crossovers, directory / CROSSOVER_PLOT, title):
        console.print(f"wrote {CROSSOVER_PLOT}: held-out bits per token against training FLOPs")
    return sentences
