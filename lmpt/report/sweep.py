"""A sweep's summary, written into its directory when the sweep ends: the table, summary.csv, summary.md,
val_loss.png and, when a downstream figure ranks the jobs, ranking.png."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig
from rich.markup import escape

from lmpt.console import console, print_whole
from lmpt.errors import LmptError
from lmpt.report.ranking import Ranking, rank_runs
from lmpt.report.runs import RunSummary, find_runs, read_status
from lmpt.rundir.directory import discard_if_fresh

SUMMARY_CSV = "summary.csv"
SUMMARY_MD = "summary.md"
SUMMARY_PLOT = "val_loss.png"
SUMMARY_RANKING_PLOT = "ranking.png"

unfinished_jobs: list[str] = []
"""The sweep that just ended: how each job that did not complete ended: "bad input", "error", or "stopped"
(preempted and not requeued). Read from the jobs' status.json, since a launcher may run the jobs in other
processes (joblib) or on other machines (submitit, SLURM)."""


@dataclass(frozen=True)
class ReportFiles:
    """Where a report goes: the table as CSV and Markdown, the validation-loss chart, and the chart of the ranked
    downstream figure (written only when such a figure ranks the runs)."""

    csv: Path
    markdown: Path
    curves: Path
    ranked: Path


def write_report(
    runs: list[RunSummary], files: ReportFiles, title: str, log_y: bool = False, ranking: Ranking | None = None
) -> None:
    """Print the table, ranked where the runs share a comparable loss or downstream figure (the title says by what;
    a downstream figure with its 95% interval, each gap to the next run tested, whether the top runs can be told
    apart, and whether any run's gain over its from-scratch control is), and write it whole as CSV and Markdown,
    with the validation-loss chart (against steps, FLOPs and loss-bearing tokens) and, ranked by a downstream
    figure, its chart with the intervals, beside them. A loss-ranked table pools each setting's seeds into one row
    with its interval and tests each gap (lmpt.report.seed_pool), or says that it rests on one seed. `ranking`
    orders them when the caller decides (a study ranks by its own rule); by default choose_ranking does."""
    from lmpt.report.console_table import console_table
    from lmpt.report.control_gain import control_columns, within_noise_sentence
    from lmpt.report.crossover import report_crossover
    from lmpt.report.plot import plot_val_curves  # matplotlib only once there is something to draw
    from lmpt.report.ranking_plot import plot_ranking, ranking_chart
    from lmpt.report.seed_pool import one_seed_caveat, pool_seeds, seed_columns
    from lmpt.report.significance import Significance, legend, neighbour_significance, significance_columns
    from lmpt.report.table import run_labels, write_csv, write_markdown

    every_run = runs
    runs, ranking = rank_runs(runs, ranking)
    pool = pool_seeds(runs, ranking)
    significance: Significance | None
    if pool is not None:  # a setting over several seeds is one row: its mean, spread and interval
        runs, ranking, significance = pool.rows, pool.ranking, pool.significance
    else:
        significance = neighbour_significance(runs, ranking)
    seeds = seed_columns(pool) if pool is not None else []
    verdict = significance.verdict() if significance is not None else ""
    noise = within_noise_sentence(runs, ranking)
    caveat = one_seed_caveat(runs, ranking) if pool is None else ""
    table, left_out = console_table(runs, ranking, significance, title=f"{title}: {ranking.header}", extra=seeds)
    print_whole(table)
    for line in (verdict, noise, caveat):
        if line:
            console.print(escape(line))
    if significance is not None and significance.gaps:
        console.print(escape(legend("vs next", pooled=pool is not None)))
    common = run_labels(runs)[1]
    if common:
        console.print(f"all runs: {escape(' '.join(common))}")
    if left_out:
        console.print(f"more columns in {files.csv.name} and {files.markdown.name}: {escape(', '.join(left_out))}")
    extra = [*seeds, *significance_columns(significance), *control_columns(runs, ranking)]
    gaps = significance is not None and significance.gaps
    note = f"{verdict} {legend('`vs_next`', pooled=pool is not None)}" if gaps else caveat
    chart = ranking_chart(runs, ranking, significance)
    plots = [files.ranked] * (chart is not None) + [files.curves]
    pooled = " (each setting: the mean over its seeds)" if pool is not None else ""
    try:
        write_csv(runs, files.csv, extra)
        write_markdown(runs, files.markdown, ranking.header, extra, note.strip(), [noise], [p.name for p in plots])
        plot_val_curves(runs, files.curves, log_y=log_y, title=f"validation loss{pooled}: {title}", ranking=ranking)
        if chart is not None:
            plot_ranking(chart, files.ranked, f"{title}: {ranking.header}")
    except OSError as exc:
        raise LmptError(f"cannot write the report into {files.csv.parent}: {exc.strerror or exc}") from exc
    written = [str(files.csv), files.markdown.name, *(p.name for p in plots)]
    console.print(f"wrote {', '.join(written[:-1])} and {written[-1]}")
    report_crossover(every_run, files.csv.parent, title)  # likelihood runs over several budgets: where a bound crosses


def summary_files(directory: Path) -> ReportFiles:
    """summary.csv, summary.md, val_loss.png and ranking.png in `directory`."""
    return ReportFiles(*(directory / name for name in (SUMMARY_CSV, SUMMARY_MD, SUMMARY_PLOT, SUMMARY_RANKING_PLOT)))


def summarize_sweep(sweep_dir: Path | str) -> list[RunSummary]:
    """Summarize every job under `sweep_dir` into its summary.csv, summary.md, val_loss.png and (ranked by a
    downstream figure) ranking.png, in job order."""
    sweep_dir = Path(sweep_dir)
    runs = find_runs([sweep_dir])
    jobs = f"{len(runs)} job{'s' if len(runs) != 1 else ''}"
    write_report(runs, summary_files(sweep_dir), f"sweep of {jobs}")  # no machine path: a title travels in docs
    return runs


def unfinished_jobs_in(sweep_dir: Path | str) -> list[str]:
    """How each job under `sweep_dir` that did not complete ended, from its status.json: "bad input", "error", or
    "stopped" (preempted and not requeued)."""
    statuses = [read_status(job) for job in Path(sweep_dir).iterdir() if job.name.isdecimal()]
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
        sweep_dir = Path(config.hydra.sweep.dir)
        if sweep_dir.is_dir() and not any(job.is_dir() for job in sweep_dir.iterdir()):
            discard_if_fresh(sweep_dir)  # no job kept a folder (dry runs): nothing to summarise, nothing left behind
            return
        unfinished_jobs[:] = unfinished_jobs_in(config.hydra.sweep.dir)
        try:
            summarize_sweep(config.hydra.sweep.dir)
        except LmptError as exc:  # the jobs' results stand; a missing summary is not worth failing the sweep
            console.print(f"[yellow]sweep summary skipped: {exc}[/]")
