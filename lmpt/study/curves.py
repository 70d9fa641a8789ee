"""The curves of a study's final runs (`downstream.score_every`): each objective's zero-shot accuracy on each task's
fast subset as training went, against steps and training FLOPs (the budget the objectives share), one line per
final run coloured by objective with its 95% interval shaded, chance dashed. Written as STUDY/curves.png, which
study.md links; runs that logged no curve point (score_every=0) draw nothing."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

from lmpt.downstream.figures import ACCURACY, CHANCE, CURVE_PREFIX
from lmpt.downstream.significance import high_key, low_key
from lmpt.report.runs import METRICS_FILE, read_records
from lmpt.study.runs import FinalRun

if TYPE_CHECKING:
    from matplotlib.figure import Figure


CURVES_PNG = "curves.png"
X_AXES = {"step": "step", "training FLOPs": "flops"}
"""Each column's x axis: its label, and the key of a curve point that holds it."""


def curve_points(run_dir: Path) -> dict[str, list[dict[str, float | None]]]:
    """Task -> the run's curve points in step order, each {step, flops, accuracy, accuracy_low, accuracy_high,
    chance} as far as logged (a step logged twice keeps its last point)."""
    by_task: dict[str, dict[int, dict[str, float | None]]] = defaultdict(dict)
    for record in read_records(run_dir / METRICS_FILE):
        for key, value in record.items():
            if not key.startswith(CURVE_PREFIX) or not isinstance(value, int | float):
                continue
            task, _, figure = key.removeprefix(CURVE_PREFIX).rpartition("/")
            point = by_task[task].setdefault(record["step"], {"step": record["step"], "flops": record.get("flops")})
            point[figure] = value
    return {task: [points[s] for s in sorted(points)] for task, points in sorted(by_task.items())}


def plot_curves(finals: dict[str, list[FinalRun]], path: Path) -> bool:
    """`draw_curves` written as a PNG at `path`; False (nothing written) when no final run logged a curve point."""
    fig = draw_curves(finals)
    if fig is None:
        return False
    fig.savefig(path, format="png")
    return True


def draw_curves(finals: dict[str, list[FinalRun]]) -> Figure | None:
    """A row per task, a column per x axis (X_AXES), a line per final run; None when no run logged a curve point."""
    runs = [(objective, curve_points(f.path)) for objective, fs in finals.items() for f in fs]
    tasks = sorted({task for _, curves in runs for task in curves})
    if not tasks:
        return None
    from matplotlib.figure import Figure

    colour = {objective: f"C{i}" for i, objective in enumerate(finals)}
    fig = Figure(figsize=(12, 4 * len(tasks)), dpi=110, layout="constrained")
    axes = fig.subplots(len(tasks), len(X_AXES), squeeze=False)
    for row, task in zip(axes, tasks, strict=True):
        for ax, (x_label, x_key) in zip(row, X_AXES.items(), strict=True):
            _draw(ax, runs, task, x_key, colour)
            ax.set_xlabel(x_label)
            ax.set_ylabel(f"{task} {ACCURACY} (fast subset)")
            ax.grid(True, alpha=0.3)
        entries = len(row[0].get_legend_handles_labels()[1])  # above the panel, in a row: inside, it hid curves
        row[0].legend(
            fontsize="small", loc="lower left", bbox_to_anchor=(0, 1.01), ncols=max(entries, 1), frameon=False
        )
    fig.suptitle("zero-shot accuracy during training (downstream.score_every), 95% intervals shaded")
    return fig


def _draw(ax, runs: list[tuple[str, dict]], task: str, x_key: str, colour: dict[str, str]) -> None:
    """Every run's curve of `task` on `ax` against `x_key`; chance as a dashed line."""
    labelled: set[str] = set()
    for objective, curves in runs:
        points = [p for p in curves.get(task, []) if p.get(x_key) is not None and ACCURACY in p]
        if not points:
            continue
        xs = [p[x_key] for p in points]
        label = objective if objective not in labelled else None
        labelled.add(objective)
        ax.plot(xs, [p[ACCURACY] for p in points], color=colour[objective], marker="o", markersize=3, label=label)
        if all(low_key(ACCURACY) in p and high_key(ACCURACY) in p for p in points):
            lows, highs = [p[low_key(ACCURACY)] for p in points], [p[high_key(ACCURACY)] for p in points]
            ax.fill_between(xs, lows, highs, color=colour[objective], alpha=0.12, linewidth=0)
    chances = {p[CHANCE] for _, curves in runs for p in curves.get(task, []) if CHANCE in p}
    if len(chances) == 1:
        ax.axhline(chances.pop(), color="grey", linestyle="--", linewidth=1, label="chance")
