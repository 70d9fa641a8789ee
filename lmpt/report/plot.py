"""Validation-loss curves of several runs on one chart, written as a PNG."""

from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display, no GUI toolkit

import matplotlib.pyplot as plt  # noqa: E402

from lmpt.report.runs import RunSummary  # noqa: E402
from lmpt.report.table import run_labels  # noqa: E402

MARKERS_UP_TO = 30  # evaluations per run below which each point gets a marker


def plot_val_curves(runs: list[RunSummary], path: Path, log_y: bool = False, title: str = "validation loss") -> None:
    """Every run's (step, val_loss) curve, labelled by the overrides that tell the runs apart; runs without an
    evaluation are left out (a chart that says so is written when none has one)."""
    labels, common = run_labels(runs)
    fig, ax = plt.subplots(figsize=(9, 5.5), dpi=120)
    try:
        plotted = 0
        for run, label in zip(runs, labels, strict=True):
            if not run.val_curve:
                continue
            steps, losses = zip(*run.val_curve, strict=True)
            ax.plot(steps, losses, label=label, marker="o" if len(steps) <= MARKERS_UP_TO else None, markersize=3)
            plotted += 1
        if plotted:
            ax.legend(fontsize="small", loc="best")
            if log_y:
                ax.set_yscale("log")
        else:
            ax.text(0.5, 0.5, "no evaluations yet", ha="center", va="center", transform=ax.transAxes)
        shared = textwrap.fill(" ".join(common), width=110)  # a long line would run off the figure
        ax.set_title(title + (f"\n{shared}" if common else ""), fontsize="small")
        ax.set_xlabel("step")
        ax.set_ylabel("validation loss" + (" (log scale)" if log_y and plotted else ""))
        ax.grid(True, alpha=0.3)
        fig.tight_layout()
        fig.savefig(path, format="png")
    finally:
        plt.close(fig)
