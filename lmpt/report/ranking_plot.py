"""The downstream figure a table of runs is ranked by, as a chart: one point per run in rank order with its 95%
interval as an error bar (the interval lmpt.report.significance reads from the run's record: a bootstrap over items
zero-shot, Student's t over seeds fine-tuned), runs named as the console table names them, and the task's chance
level or majority class and each run's untrained (scratch) control drawn for reference where the runs logged them."""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass
from pathlib import Path

from matplotlib.figure import Figure

from lmpt.downstream.figures import CHANCE, MAJORITY_ACCURACY, task_figure
from lmpt.downstream.significance import LEVEL
from lmpt.report.control_gain import control_key
from lmpt.report.ranking import Ranking
from lmpt.report.runs import RunSummary
from lmpt.report.significance import Significance
from lmpt.report.table import run_labels

REFERENCES = ((CHANCE, "chance"), (MAJORITY_ACCURACY, "majority class"))
"""The task's figures drawn beside the ranked one when the runs logged them: (figure, legend name); the untrained
control's figure of the ranked one (control_key: zero-shot or fine-tuned) is drawn after them."""
LABEL_WIDTH = 48  # characters of a run's name per line on the chart's axis


@dataclass(frozen=True)
class Reference:
    """A figure to read the ranked one against (chance, the majority class, the untrained control)."""

    name: str
    values: list[float | None]
    """Per plotted run, in rank order (None where the run did not log it)."""

    @property
    def shared(self) -> float | None:
        """The one value every run that logged it shares (a line across the chart), else None (a mark per run)."""
        known = [v for v in self.values if v is not None]
        return known[0] if known and all(math.isclose(v, known[0]) for v in known) else None


@dataclass(frozen=True)
class RankingChart:
    """What the chart draws: the ranked runs best first, each with its figure and interval, and the references."""

    figure: str
    """`TASK/FIGURE`, the ranked figure."""
    labels: list[str]
    """Each run's overrides less those every run shares, as the console table names it."""
    values: list[float]
    intervals: list[tuple[float, float] | None]
    """The 95% interval of each run's figure; None where its record holds none."""
    references: list[Reference]
    higher_is_better: bool = True
    """False for a loss (a setting's mean over seeds)."""


def ranking_chart(runs: list[RunSummary], ranking: Ranking, significance: Significance | None) -> RankingChart | None:
    """The chart of `runs` (ranked best first) by `ranking`'s downstream figure, or by a loss pooled over seeds
    (lmpt.report.seed_pool); None unless such a figure ranks (`significance` holds the intervals)."""
    if significance is None or ranking.key is None:
        return None
    names = dict(zip((id(r) for r in runs), run_labels(runs)[0], strict=True))
    ranked = [r for r in runs if ranking.value(r) is not None]
    task = ranking.key.rsplit("/", 1)[0]
    shown = [(f"{task}/{figure}", name) for figure, name in REFERENCES]
    if ranking.higher_is_better:  # a downstream figure: its untrained control beside it
        shown.append((control_key(ranking.key), "scratch control"))
    references = [
        Reference(name, [r.downstream.get(key) for r in ranked])
        for key, name in shown
        if any(key in r.downstream for r in ranked)
    ]
    return RankingChart(
        task_figure(ranking.key),
        [names[id(r)] for r in ranked],
        [float(ranking.value(r)) for r in ranked],  # type: ignore[arg-type]
        [significance.interval(r) for r in ranked],
        references,
        ranking.higher_is_better,
    )


def draw_ranking(chart: RankingChart, title: str) -> Figure:
    """The chart as a matplotlib figure: the best run on top, the figure along x."""
    n = len(chart.values)
    fig = Figure(figsize=(10, max(3.0, 1.6 + 0.45 * n)), dpi=110, layout="constrained")
    ax = fig.subplots()
    rows = list(range(n))
    shown = [i for i in rows if chart.intervals[i] is not None]
    if shown:
        lows = [chart.values[i] - chart.intervals[i][0] for i in shown]  # type: ignore[index]
        highs = [chart.intervals[i][1] - chart.values[i] for i in shown]  # type: ignore[index]
        ax.errorbar(
            [chart.values[i] for i in shown],
            shown,
            xerr=[lows, highs],
            fmt="o",
            capsize=4,
            color="C0",
            label=f"{chart.figure}, {LEVEL:.0%} interval",
        )
    bare = [i for i in rows if chart.intervals[i] is None]
    if bare:
        ax.plot(
            [chart.values[i] for i in bare],
            bare,
            "o",
            mfc="none",
            color="C0",
            label=f"{chart.figure} (no interval in its record)",
        )
    for k, ref in enumerate(chart.references, start=1):
        if ref.shared is not None:
            ax.axvline(ref.shared, linestyle="--", color=f"C{k}", label=f"{ref.name} {ref.shared:.3f}")
        else:  # each run's own (a scratch control of its own size): a mark on its row
            marked = [(i, value) for i in rows if (value := ref.values[i]) is not None]
            ax.plot(
                [value for _, value in marked],
                [i for i, _ in marked],
                "|",
                markersize=14,
                mew=2,
                color=f"C{k}",
                label=ref.name,
            )
    ax.set_yticks(rows, [textwrap.fill(label, LABEL_WIDTH) for label in chart.labels], fontsize="small")
    ax.set_ylim(n - 0.5, -0.5)  # the best run on top
    ax.set_xlabel(f"{chart.figure} ({'higher' if chart.higher_is_better else 'lower'} is better)")
    ax.grid(True, axis="x", alpha=0.3)
    handles, names = ax.get_legend_handles_labels()  # below the chart: inside, it could hide an interval
    fig.legend(handles, names, loc="outside lower center", ncols=min(3, len(names)), fontsize="small")
    ax.set_title(textwrap.fill(title, 110), fontsize="small")
    return fig


def plot_ranking(chart: RankingChart, path: Path, title: str) -> None:
    """The chart written as a PNG at `path`."""
    draw_ranking(chart, title).savefig(path, format="png")
