"""Validation-loss curves of several runs against steps, training FLOPs and loss-bearing tokens, side by side
on one chart written as a PNG (a run evaluated only once is a point, not a curve)."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

from matplotlib.figure import Figure

from lmpt.report.ranking import Ranking, choose_ranking
from lmpt.report.runs import RunSummary
from lmpt.report.table import run_labels

MARKERS_UP_TO = 30  # evaluations per run below which each point gets a marker
X_AXES: dict[str, Callable[[RunSummary, int], float | None]] = {
    "step": lambda run, step: step,
    "training FLOPs": lambda run, step: run.compute_at.get(step, (None, None))[0],
    "loss-bearing tokens": lambda run, step: run.compute_at.get(step, (None, None))[1],
}
"""Each panel's x axis: a run's value at an evaluation step (None where its records do not say)."""


ONCE_NOTE = "each run evaluated once (at its end): one point per run, not a curve"
"""The chart's note when no run has more than one evaluation."""


def plot_val_curves(
    runs: list[RunSummary],
    path: Path,
    log_y: bool = False,
    title: str = "validation loss",
    ranking: Ranking | None = None,
) -> None:
    """`draw_val_curves` written as a PNG at `path`."""
    draw_val_curves(runs, log_y, title, ranking).savefig(path, format="png")


def draw_val_curves(
    runs: list[RunSummary], log_y: bool = False, title: str = "validation loss", ranking: Ranking | None = None
) -> Figure:
    """Every run's curve of the ranked validation loss (the fixed-rate loss when the runs are ranked by it),
    against steps, FLOPs and loss-bearing tokens, labelled by the overrides that tell the runs apart. A run
    evaluated once is a marker, not a line; when every run was, a note says so. Runs without an evaluation are left
    out (a chart that says so is drawn when none has one)."""
    ranking = ranking or choose_ranking(runs)
    labels, common = run_labels(runs)
    fig = Figure(figsize=(16, 5.5), dpi=110, layout="constrained")
    axes = fig.subplots(1, len(X_AXES), sharey=True)
    plotted = 0
    for ax, (x_label, x_of) in zip(axes, X_AXES.items(), strict=True):
        for run, label in zip(runs, labels, strict=True):
            points = [(x_of(run, step), loss) for step, loss in ranking.curve(run)]
            points = [(x, loss) for x, loss in points if x is not None]
            if not points:
                continue
            xs, losses = zip(*points, strict=True)
            if len(xs) == 1:
                ax.plot(xs, losses, label=label, linestyle="none", marker="o", markersize=6)
            else:
                ax.plot(xs, losses, label=label, marker="o" if len(xs) <= MARKERS_UP_TO else None, markersize=3)
            plotted += 1
        ax.set_xlabel(x_label)
        ax.grid(True, alpha=0.3)
        if log_y and plotted:
            ax.set_yscale("log")
    if plotted:  # below the panels: inside one, many runs' names would hide its curves and axis
        handles, names = axes[0].get_legend_handles_labels()
        fig.legend(handles, names, loc="outside lower center", ncols=min(3, len(names)), fontsize="small")
    else:
        axes[1].text(0.5, 0.5, "no evaluations yet", ha="center", va="center", transform=axes[1].transAxes)
    axes[0].set_ylabel(ranking.label + (" (log scale)" if log_y and plotted else ""))
    evaluated = [len(ranking.curve(run)) for run in runs if ranking.curve(run)]
    once = [ONCE_NOTE] if evaluated and max(evaluated) == 1 else []
    shared = [" ".join(common)] if common else []
    lines = [textwrap.fill(line, width=160) for line in [title, ranking.header, *once, *shared]]  # none runs off
    fig.suptitle("\n".join(lines), fontsize="small")
    return fig
