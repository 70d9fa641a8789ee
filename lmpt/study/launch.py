"""How a study holds its directory and its runs: each an ordinary `lmpt` run in a directory of its own, launched as a
child process (or a SLURM job) on one of the study's slots (lmpt.study.pool), with the study directory locked for the
study's life.

- A run directory launched with other run keys (another study's) is refused before anything trains.
- A stop signal to the study (SIGTERM, Ctrl-C) is passed on to its run as SIGTERM: the run saves a checkpoint and
  exits, then the study stops (StudyStopped), and the same command resumes both.
- A study killed outright (kill -9) leaves no run behind: on Linux each run is told to stop (SIGTERM) when the study
  dies. Where that is not possible, or the run is still saving its checkpoint, the next launch of the study finds the
  run it left (STUDY/.running names it, and the run's own lock confirms it), stops it and waits for it to end, so
  two studies never train in one directory."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import time
from pathlib import Path
from types import FrameType

from omegaconf import OmegaConf

from lmpt.console import console
from lmpt.errors import LmptError
from lmpt.locks import holder
from lmpt.rundir.directory import LOCK_FILE, lock_run_dir

RUNNING = ".running"
"""STUDY/.running: the runs the study is training now (each run's process or SLURM job, and its directory), rewritten
as they start and end, removed when none is left."""
STOP_WAIT_S = 300.0
"""How long a run left by a killed study may take to save its checkpoint and end before it is killed."""
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StudyStopped(BaseException):
    """A stop signal ended the study (a BaseException, as KeyboardInterrupt is: no `except Exception` swallows it)."""

    def __init__(self, signum: int) -> None:
        self.signal = signal.Signals(signum)
        super().__init__(self.signal.name)


def _raise_stopped(signum: int, frame: FrameType | None) -> None:
    raise StudyStopped(signum)


def stop_on_signals() -> None:
    """SIGTERM and SIGINT raise StudyStopped in the study's process, wherever it is."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, _raise_stopped)


def lock_holder(directory: Path) -> int | None:
    """The PID holding `directory`'s lock (lmpt.rundir.directory), or None when nobody holds it."""
    text = holder(directory / LOCK_FILE)
    if text is None:
        return None
    return int(text) if text.isdecimal() else -1


def lock_study(directory: Path) -> None:
    """Hold the study directory for this process: a second study there is refused in one line."""
    holder = lock_holder(directory)
    if holder is None:
        with contextlib.suppress(LmptError):  # taken in between: said below with the holder's PID
            lock_run_dir(directory)
            return
        holder = lock_holder(directory)
    raise LmptError(
        f"{directory} is in use by another lmpt-study (PID {holder}): wait for it to end or stop it, or "
        "pick another study.dir"
    )


def left_runs(study_dir: Path) -> list[dict[str, str | int]]:
    """What STUDY/.running names: one entry per run ({"pid", "run"} or, under SLURM, {"job", "run"}); a study of one
    slot at a time wrote a single entry."""
    try:
        left = json.loads((study_dir / RUNNING).read_text())
    except (OSError, ValueError):
        return []
    entries = left if isinstance(left, list) else [left]
    return [e for e in entries if isinstance(e, dict) and "run" in e and ("pid" in e or "job" in e)]


def write_running(study_dir: Path, entries: list[dict[str, str | int]]) -> None:
    """Name the runs the study trains now in STUDY/.running (removed when there is none)."""
    path = study_dir / RUNNING
    if entries:
        path.write_text(json.dumps(entries) + "\n")
    else:
        path.unlink(missing_ok=True)


def _stop_left_process(pid: int, run: Path) -> None:
    if lock_holder(run) != pid:  # it ended, or the PID is another process's now
        return
    console.print(f"stopping the run a killed study left training in {run} (PID {pid}): it saves a checkpoint first")
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_WAIT_S
    while lock_holder(run) == pid:
        if time.monotonic() > deadline:  # a run's checkpoints are committed whole: killing it loses no saved step
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.2)


def _wait_for_left_job(study_dir: Path, job: str, run: Path) -> None:
    from lmpt.study.slurm_jobs import JOBS_FOLDER, job_active

    if not job_active(study_dir / JOBS_FOLDER, job):
        return
    console.print(f"waiting for SLURM job {job}, which a stopped study left training {run}")
    while job_active(study_dir / JOBS_FOLDER, job):
        time.sleep(5)


def stop_left_run(study_dir: Path) -> None:
    """Stop the runs a killed study left training (STUDY/.running, each under the study's own folder and confirmed by
    the run's lock) and wait for
    them to end, so this study continues them instead of training beside them; a SLURM job it left is waited for
    (its run ends, or commits a checkpoint and is requeued by SLURM, on its own)."""
    home = study_dir.resolve()
    for entry in left_runs(study_dir):
        run = Path(str(entry["run"]))
        if not run.resolve().is_relative_to(home):  # never a run outside the study's own folder, whatever it names
            console.print(f"{study_dir / RUNNING} names {run}, outside the study: left alone")
            continue
        try:
            if "job" in entry:
                _wait_for_left_job(study_dir, str(entry["job"]), Path(str(entry["run"])))
            else:
                _stop_left_process(int(entry["pid"]), Path(str(entry["run"])))
        except (ValueError, TypeError):
            continue
    (study_dir / RUNNING).unlink(missing_ok=True)


def refuse_another_run(
    path: Path, command: list[str], elsewhere: str = "another study's run; pick another study.dir"
) -> None:
    """A run directory launched with other run keys (another study's, or a trial of another recipe) is not reused:
    the study says so before training anything."""
    overrides_file = path / ".hydra" / "overrides.yaml"
    if not overrides_file.exists():
        return
    given = set(command[3:-1])  # the run keys: the command less `python -m lmpt` and hydra.run.dir
    saved = {str(o) for o in OmegaConf.load(overrides_file)}
    if saved != given:
        differ = sorted(saved ^ given)[:4]
        raise LmptError(
            f"{path} was launched with other run keys ({', '.join(differ)} differ): it is {elsewhere} or move it away"
        )


def stop_with_study() -> None:
    """In the child, before lmpt starts (Linux): SIGTERM when the study dies, however it dies."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
