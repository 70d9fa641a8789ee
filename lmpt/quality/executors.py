"""Run the quality stages on every core of this machine (datatrove's LocalPipelineExecutor), with one progress
bar over every task. A task datatrove has marked complete (logs/STAGE/completions/NNNNN) is never run
again: a killed prepare, run again, resumes where it stopped."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

from datatrove.executor import LocalPipelineExecutor
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from lmpt.config.quality_schema import QualityConfig
from lmpt.console import console
from lmpt.cores import usable_cores
from lmpt.errors import LmptError
from lmpt.quality.pipeline import Stage

_POLL_SECONDS = 0.5


def stage_logs(work: Path, stage: Stage) -> Path:
    """datatrove's logging folder of `stage` (its completions/, logs/ and stats)."""
    return work / "logs" / stage.name.replace(" ", "_")


def completed(work: Path, stage: Stage) -> int:
    """Tasks of `stage` datatrove has marked complete."""
    done = stage_logs(work, stage) / "completions"
    return len(list(done.iterdir())) if done.is_dir() else 0


@contextlib.contextmanager
def datatrove_output(log: Path) -> Iterator[None]:
    """datatrove's log lines and tqdm bars (written to stderr by it and its workers) go to `log` instead."""
    log.parent.mkdir(parents=True, exist_ok=True)
    sys.stderr.flush()
    saved = os.dup(2)
    with open(log, "ab") as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)


@contextlib.contextmanager
def progress_bar(work: Path, stages: list[Stage]) -> Iterator[None]:
    """A rich progress bar over every task of `stages`, advanced from datatrove's completion markers."""
    total = sum(s.tasks for s in stages)
    stop = threading.Event()
    with Progress(
        TextColumn("quality"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    ) as progress:
        bar = progress.add_task("", total=total)

        def poll() -> None:
            while True:
                done = [completed(work, s) for s in stages]
                current = next((s.name for s, d in zip(stages, done, strict=True) if d < s.tasks), "done")
                progress.update(bar, completed=sum(done), description=current)
                if stop.wait(_POLL_SECONDS):
                    return

        thread = threading.Thread(target=poll, daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
            done = [completed(work, s) for s in stages]
            progress.update(bar, completed=sum(done), description="done" if sum(done) == total else "stopped")


def run_local(stages: list[Stage], work: Path, workers: int) -> None:
    """Run the stages one after the other on this machine, each on up to `workers` processes."""
    for stage in stages:
        executor = LocalPipelineExecutor(
            stage.steps,
            tasks=stage.tasks,
            workers=max(1, min(workers, stage.tasks)),
            logging_dir=str(stage_logs(work, stage)),
            skip_completed=True,
        )
        executor.run()
        if completed(work, stage) < stage.tasks:
            raise LmptError(f"quality stage '{stage.name}' failed: see {stage_logs(work, stage)}/logs")


def available_cores() -> int:
    """The cores this process may use: a SLURM job's --cpus-per-task (SLURM need not pin the job to them), else
    the CPUs this process is allowed to run on."""
    granted = os.environ.get("SLURM_CPUS_PER_TASK", "")
    if granted.isdecimal() and int(granted) > 0:
        return int(granted)
    return usable_cores()


def run_stages(stages: list[Stage], work: Path, cfg: QualityConfig) -> None:
    """Run `stages` on this machine, showing progress; datatrove's own output goes to work/logs."""
    workers = cfg.workers or available_cores()
    with progress_bar(work, stages), datatrove_output(work / "logs" / "datatrove.log"):
        run_local(stages, work, workers)
