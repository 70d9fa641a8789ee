"""One row per run, as a rich table on the console, a CSV file, or a Markdown table."""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.markup import escape
from rich.table import Table

from lmpt.downstream.figures import ACCURACY, ACCURACY_MEAN, ACCURACY_NORM, MACRO_F1_MEAN, task_figure
from lmpt.report.markdown import markdown_table
from lmpt.report.runs import RunSummary

Value = str | int | float | None
DOWNSTREAM_COLUMNS = tuple(f"/{f}" for f in (ACCURACY, ACCURACY_NORM, ACCURACY_MEAN, MACRO_F1_MEAN))
"""The downstream figures shown as columns (chance, std and the rest stay in metrics.jsonl)."""


@dataclass(frozen=True)
class Column:
    title: str
    value: Callable[[RunSummary], Value]
    format: Callable[[Value], str] = str
    numeric: bool = False


def run_labels(runs: list[RunSummary]) -> tuple[list[str], list[str]]:
    """Each run's overrides less those every run shares (the shared ones are returned second), so a sweep's
    rows and legend show what differs between its jobs."""
    shared = set.intersection(*(set(r.overrides) for r in runs)) if len(runs) > 1 else set()
    labels = [" ".join(o for o in r.overrides if o not in shared) or r.path.name for r in runs]
    common = [o for o in runs[0].overrides if o in shared] if runs else []
    return labels, common


def _number(digits: int) -> Callable[[Value], str]:
    return lambda v: "" if v is None else f"{v:.{digits}f}"


def format_rate(value: Value) -> str:
    if value is None:
        return ""
    value = float(value)
    return f"{value / 1e6:.2f}M" if value >= 1e6 else f"{value / 1e3:.1f}k" if value >= 1e3 else f"{value:.0f}"


def format_duration(value: Value) -> str:
    if value is None:
        return ""
    value = float(value)
    if not math.isfinite(value):
        return ""
    seconds = int(round(value))
    if value < 60:
        return f"{value:.1f}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def format_flops(value: Value) -> str:
    return "" if value is None else f"{value:.2e}"


def _reader(field: str, key: str) -> Callable[[RunSummary], Value]:
    """The run's figure `key` of its `field` dict (downstream, measures), None where it has none."""
    return lambda run: getattr(run, field).get(key)


def columns(runs: list[RunSummary], extra: Sequence[Column] = ()) -> list[Column]:
    """run, objective, status, step, downstream figures (when any run has one), the fixed-rate loss (when any run
    has one), val_loss, val_ppl, every objective measure any run has, tokens/s, loss-bearing tokens/s, FLOPs, training
    wall time over every launch, downstream scoring time (when any run has one), then `extra` (the ranked figure's
    interval and significance, lmpt.report.significance)."""
    labels = dict(zip((id(r) for r in runs), run_labels(runs)[0], strict=True))
    measures = sorted({key for r in runs for key in r.measures})
    downstream = sorted({key for r in runs for key in r.downstream if key.endswith(DOWNSTREAM_COLUMNS)})
    optional = lambda v: "" if v is None else str(v)
    fixed = [
        Column("val_fixed_loss", lambda r: r.fixed_loss, _number(4), numeric=True),
        Column("val_fixed_ppl", lambda r: r.fixed_ppl, _number(2), numeric=True),
    ]
    scoring = [Column("downstream_s", lambda r: r.downstream_s, format_duration, numeric=True)]
    return [
        Column("run", lambda r: labels[id(r)]),
        Column("objective", lambda r: r.objective, optional),
        Column("status", lambda r: r.status),
        Column("step", lambda r: r.step, optional, numeric=True),
        *(Column(task_figure(key), _reader("downstream", key), _number(4), numeric=True) for key in downstream),
        *(fixed if any(r.fixed_loss is not None for r in runs) else []),
        Column("val_loss", lambda r: r.val_loss, _number(4), numeric=True),
        Column("val_ppl", lambda r: r.val_ppl, _number(2), numeric=True),
        *(Column(key, _reader("measures", key), _number(4), numeric=True) for key in measures),
        Column("tokens_per_s", lambda r: r.tokens_per_s, format_rate, numeric=True),
        Column("loss_tokens_per_s", lambda r: r.loss_tokens_per_s, format_rate, numeric=True),
        Column("flops", lambda r: r.flops, format_flops, numeric=True),
        Column("wall_s", lambda r: r.wall_s, format_duration, numeric=True),  # training, over every launch
        *(scoring if any(r.downstream_s for r in runs) else []),
        *extra,
    ]


def formatted_rows(runs: list[RunSummary], extra: Sequence[Column] = ()) -> tuple[list[str], list[list[str]]]:
    cols = columns(runs, extra)
    return [c.title for c in cols], [[c.format(c.value(r)) for c in cols] for r in runs]


STATUS_STYLE = {"completed": "green", "preempted": "yellow", "incomplete": "yellow"}


def runs_table(runs: list[RunSummary], title: str | None = None) -> Table:
    """The rich table the console shows (the overrides every run shares are left to the caller)."""
    table = Table(title=title)
    for col in columns(runs):
        table.add_column(col.title, justify="right" if col.numeric else "left", overflow="fold")
    header, rows = formatted_rows(runs)
    at = header.index("status")
    for row in rows:
        row[at] = f"[{STATUS_STYLE.get(row[at], 'red')}]{escape(row[at])}[/]"
        table.add_row(*(escape(v) if i != at else v for i, v in enumerate(row)))
    return table


def write_csv(runs: list[RunSummary], path: Path, extra: Sequence[Column] = ()) -> None:
    """The table's columns at full precision (times in seconds), plus every run's full overrides and path (a row
    pooled over seeds: each seed's run directory)."""
    cols = columns(runs, extra)
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow([c.title for c in cols] + ["overrides", "path"])
        for run in runs:
            values = [c.value(run) for c in cols]
            paths = [m.path for m in run.members] or [run.path]  # a setting pooled over seeds: each seed's run
            writer.writerow(["" if v is None else v for v in values] + [run.name, " ".join(map(str, paths))])


def write_markdown(
    runs: list[RunSummary],
    path: Path,
    ranking: str = "",
    extra: Sequence[Column] = (),
    note: str = "",
    paragraphs: Sequence[str] = (),
    images: Sequence[str] = (),
) -> None:
    """The table as GitHub Markdown, with the overrides every run shares and the `ranking` sentence above it, `note`
    (what the significance tests found) after that sentence and each of `paragraphs` under it; below the table, each
    of `images` (charts written beside the file, named relative to it), alt text its name."""
    header, rows = formatted_rows(runs, extra)
    numeric = [c.numeric for c in columns(runs, extra)]
    lines = []
    common = run_labels(runs)[1]
    if common:
        lines += [f"All runs: `{' '.join(common)}`", ""]
    if ranking:
        lines += [ranking[0].upper() + ranking[1:] + "." + (f" {note}" if note else ""), ""]
    lines += [line for paragraph in paragraphs if paragraph for line in (paragraph, "")]
    lines += markdown_table(header, rows, numeric)
    lines += [line for image in images for line in ("", f"![{image}]({image})")]
    path.write_text("\n".join(lines) + "\n")
