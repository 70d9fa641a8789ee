"""A sweep's summary, written into its directory when the sweep ends: the table, summary.csv, summary.md and
val_loss.png."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig
from rich.console import RenderableType
from rich.markup import escape
from rich.segment import Segments

from lmpt.console import console
from lmpt.errors import LmptError
from lmpt.report.ranking import rank_runs
from lmpt.report.runs import RunSummary, find_runs, read_status

SUMMARY_CSV = "summary.csv"
SUMMARY_MD = "summary.md"
SUMMARY_PLOT = "val_loss.png"

unfinished_jobs: list[str] = []
"""The sweep that just ended: how each job that did not complete ended: "bad input", "error", or "stopped"
(preempted and not requeued). Read from the jobs' status.json, since a launcher may run the jobs in other
processes (joblib) or on other machines (submitit, SLURM)."""


def print_whole(renderable: RenderableType) -> None:
    """Print at the renderable's natural width when output goes to a file or pipe (rich would squeeze it to
    80 columns); a terminal keeps its own width."""
    if console.is_terminal:
        console.print(renderable)
        return
    wide = console.options.update_width(10_000)
    width = max(console.width, console.measure(renderable, options=wide).maximum)
    lines = console.render_lines(renderable, console.options.update_width(width), new_lines=True)
    console.print(Segments([segment for line in lines for segment in line]))


def write_report(
    runs: list[RunSummary], csv_path: Path, md_path: Path, plot_path: Path, title: str, log_y: bool = False
) -> None:
    """Print the table, ranked where the runs share a comparable loss or downstream figure (the title says by what;
    a downstream figure with its 95% interval, each gap to the next run tested, and whether the top runs can be told
    apart), and write it whole as CSV and Markdown, with the validation-loss chart (against steps, FLOPs and
    loss-bearing tokens) beside them."""
    from lmpt.report.console_table import console_table
    from lmpt.report.plot import plot_val_curves  # matplotlib only once there is something to draw
    from lmpt.report.significance import legend, neighbour_significance, significance_columns
    from lmpt.report.table import run_labels, write_csv, write_markdown

    runs, ranking = rank_runs(runs)
    significance = neighbour_significance(runs, ranking)
    verdict = significance.verdict() if significance is not None else ""
    table, left_out = console_table(runs, ranking, significance, title=f"{title}: {ranking.header}")
    print_whole(table)
    if verdict:
        console.print(escape(verdict))
    if significance is not None and significance.gaps:
        console.print(escape(legend("vs next")))
    common = run_labels(runs)[1]
    if common:
        console.print(f"all runs: {escape(' '.join(common))}")
    if left_out:
        console.print(f"more columns in {csv_path.name} and {md_path.name}: {escape(', '.join(left_out))}")
    extra = significance_columns(significance)
    note = f"{verdict} {legend('`vs_next`')}" if significance is not None and significance.gaps else ""
    try:
        write_csv(runs, csv_path, extra)
        write_markdown(runs, md_path, ranking.header, extra, note.strip())
        plot_val_curves(runs, plot_path, log_y=log_y, title=f"validation loss: {title}", ranking=ranking)
    except OSError as exc:
        raise LmptError(f"cannot write the report into {csv_path.parent}: {exc.strerror or exc}") from exc
    console.print(f"wrote {csv_path}, {md_path.name} and {plot_path.name}")


def summarize_sweep(sweep_dir: Path | str) -> list[RunSummary]:
    """Summarize every job under `sweep_dir` into its summary.csv, summary.md and val_loss.png (in job order)."""
    sweep_dir = Path(sweep_dir)
    runs = find_runs([sweep_dir])
    write_report(runs, sweep_dir / SUMMARY_CSV, sweep_dir / SUMMARY_MD, sweep_dir / SUMMARY_PLOT, str(sweep_dir))
    return runs


def unfinished_jobs_in(sweep_dir: Path | str) -> list[str]:
    """How each job under `sweep_dir` that did not complete ended, from its status.json: "bad input", "error", or
    "stopped" (preempted and not requeued)."""
    statuses = [read_status(job) for job in Path(sweep_dir).iterdir() if job.name.isdigit()]
    endings = {"preempted": "stopped"}
    return [
        endings.get(s["status"], "bad input" if s.get("user_error") else "error")
        for s in statuses
        if s.get("status") in ("failed", "preempted")
    ]


class SweepSummary(Callback):
    """Hydra callback (under `hydra.callbacks`): once every job has run, note the ones that did not complete and
    summarize the sweep directory."""

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        unfinished_jobs[:] = unfinished_jobs_in(config.hydra.sweep.dir)
        try:
            summarize_sweep(config.hydra.sweep.dir)
        except LmptError as exc:  # the jobs' results stand; a missing summary is not worth failing the sweep
            console.print(f"[yellow]sweep summary skipped: {exc}[/]")
