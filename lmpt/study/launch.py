"""How a study runs its runs: each an ordinary `lmpt` run in a directory of its own, launched as a child process and
waited for, one at a time, with the study directory locked for the study's life.

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
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType

from omegaconf import OmegaConf

from lmpt.console import console
from lmpt.errors import LmptError
from lmpt.rundir.lock import LOCK_FILE, lock_run_dir

RUNNING = ".running"
"""STUDY/.running: the run the study is training now (its process and directory), removed when it ends."""
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
    """The PID holding `directory`'s lock (lmpt.rundir.lock), or None when nobody holds it."""
    path = directory / LOCK_FILE
    if not path.exists():
        return None
    with open(path) as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            text = handle.read().strip()
            return int(text) if text.isdigit() else -1
    return None


def lock_study(directory: Path) -> None:
    """Hold the study directory for this process: a second study there is refused in one line."""
    holder = lock_holder(directory)
    if holder is None:
        with contextlib.suppress(LmptError):  # taken in between: said below with the holder's PID
            lock_run_dir(directory)
            return
        holder = lock_holder(directory)
    raise LmptError(f"{directory} is in use by another lmpt-study (PID {holder}): wait for it to end or stop it, or "
                    "pick another study.dir")  # fmt: skip


def stop_left_run(study_dir: Path) -> None:
    """Stop the run a killed study left training (STUDY/.running, confirmed by the run's lock) and wait for it to
    end, so this study continues it instead of training beside it."""
    try:
        left = json.loads((study_dir / RUNNING).read_text())
        pid, run = int(left["pid"]), Path(left["run"])
    except (OSError, ValueError, KeyError, TypeError):
        return
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


def refuse_another_run(path: Path, command: list[str]) -> None:
    """A run directory launched with other run keys (another study's, or a trial of another recipe) is not reused:
    the study says so before training anything."""
    overrides_file = path / ".hydra" / "overrides.yaml"
    if not overrides_file.exists():
        return
    given = set(command[3:-1])  # the run keys: the command less `python -m lmpt` and hydra.run.dir
    saved = {str(o) for o in OmegaConf.load(overrides_file)}
    if saved != given:
        differ = sorted(saved ^ given)[:4]
        raise LmptError(f"{path} was launched with other run keys ({', '.join(differ)} differ): it is another "
                        "study's run; pick another study.dir or move it away")  # fmt: skip


def _stop_with_parent() -> None:
    """In the child, before lmpt starts (Linux): SIGTERM when the study dies, however it dies."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def run_lmpt(study_dir: Path, path: Path, command: list[str]) -> int:
    """Run `command` (an lmpt run into `path`) to its end and return its exit code. A stop signal to the study is
    passed on to the run, which saves a checkpoint; once it has ended, StudyStopped is raised again."""
    running = study_dir / RUNNING
    holder = lock_holder(path)
    if holder is not None:
        raise LmptError(f"{path} is in use by another lmpt process (PID {holder}): wait for it to end or stop it, "
                        "then run the same command")  # fmt: skip
    linux = sys.platform.startswith("linux")
    child = subprocess.Popen(command, preexec_fn=_stop_with_parent if linux else None)  # noqa: PLW1509
    running.write_text(json.dumps({"pid": child.pid, "run": str(path)}) + "\n")
    try:
        return child.wait()
    except StudyStopped:
        child.send_signal(signal.SIGTERM)  # a Ctrl-C reached it already: a SIGTERM beside it does not abort it
        with contextlib.suppress(StudyStopped):  # a second signal: the run still ends on its own
            child.wait()
        raise
    finally:
        if child.poll() is not None:  # a run still saving its checkpoint stays named for the next launch
            running.unlink(missing_ok=True)
