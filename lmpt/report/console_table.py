"""The console's table of runs, narrow enough for a 160-column terminal: rank, run, objective, status, step, the ranked
figure with its interval, the gap to the next run, the task's chance level or majority class and untrained control,
val_loss and wall time. Every other column stays in the CSV and Markdown files (lmpt.report.table), and the console
names them."""

from __future__ import annotations

from collections.abc import Sequence

from rich.markup import escape
from rich.table import Table

from lmpt.downstream.figures import CHANCE, MAJORITY_ACCURACY, task_figure
from lmpt.report.control_gain import control_key
from lmpt.report.ranking import Ranking
from lmpt.report.runs import RunSummary
from lmpt.report.significance import Significance, with_interval
from lmpt.report.table import STATUS_STYLE, Column, columns

KEPT = ("run", "objective", "status", "step", "val_loss", "wall_s")
"""The full table's columns the console shows (the ranked figure's column is shown with its interval)."""


def _context(runs: list[RunSummary], key: str) -> list[Column]:
    """The ranked task's chance level (zero-shot) or majority-class accuracy (fine-tuned), and the untrained
    (scratch) control's figure (either), each when any run logged it."""
    task = key.rsplit("/", 1)[0]
    shown = []
    for found, title in (
        (f"{task}/{CHANCE}", "chance"),
        (f"{task}/{MAJORITY_ACCURACY}", "majority"),
        (control_key(key), "scratch"),
    ):
        if any(found in r.downstream for r in runs):
            value = lambda r, found=found: r.downstream.get(found)
            shown.append(Column(title, value, lambda v: "" if v is None else f"{v:.3f}", numeric=True))
    return shown


def console_columns(
    runs: list[RunSummary], ranking: Ranking, significance: Significance | None, extra: Sequence[Column] = ()
) -> list[Column]:
    """The console's columns, in order: `extra` (a pooled table's seeds and spread) after the ranked figure."""
    full = {c.title: c for c in columns(runs)}
    ranked = [r for r in runs if ranking.value(r) is not None]
    rank = {id(r): i for i, r in enumerate(ranked, start=1)}
    shown = [Column("#", lambda r: rank.get(id(r)), lambda v: "" if v is None else str(v), numeric=True)]
    shown += [full[t] for t in KEPT[:4]]
    if ranking.key is not None:
        figure = task_figure(ranking.key)
        interval = significance.interval if significance is not None else lambda r: None
        title = f"{figure} [95%]" if significance is not None else figure
        digits = 3 if ranking.higher_is_better else 4  # losses of close settings differ in the third decimal
        shown.append(Column(title, lambda r: with_interval(ranking.value(r), interval(r), digits), numeric=True))
    shown += extra
    if significance is not None:
        gaps = significance.gaps
        shown.append(Column("vs next", lambda r: gaps[id(r)].mark if id(r) in gaps else ""))
        if any(significance.contradiction(r) for r in runs):
            shown.append(Column("record", significance.contradiction))
        shown += _context(runs, ranking.key) if ranking.higher_is_better and ranking.key else []
    shown += [full[t] for t in KEPT[4:] if t != (ranking.key and task_figure(ranking.key))]
    return shown


def console_table(
    runs: list[RunSummary],
    ranking: Ranking,
    significance: Significance | None,
    title: str | None = None,
    extra: Sequence[Column] = (),
) -> tuple[Table, list[str]]:
    """The rich table, and the titles of the full table's columns it leaves out (in the files)."""
    shown = console_columns(runs, ranking, significance, extra)
    table = Table(title=title)
    for col in shown:
        table.add_column(col.title, justify="right" if col.numeric else "left", overflow="fold")
    for run in runs:
        cells = [col.format(col.value(run)) for col in shown]
        at = [c.title for c in shown].index("status")
        cells = [escape(v) for v in cells]
        cells[at] = f"[{STATUS_STYLE.get(run.status, 'red')}]{cells[at]}[/]"
        table.add_row(*cells)
    titles = {c.title for c in shown} | ({task_figure(ranking.key)} if ranking.key else set())
    left_out = [c.title for c in columns(runs) if c.title not in titles]
    return table, left_out
