"""Graceful preemption: SIGTERM, SIGINT, SIGUSR1 and SIGUSR2 only raise a flag; the loop finishes the optimizer
step, commits a checkpoint and exits with EXIT_PREEMPTED so a scheduler can requeue the job. A second Ctrl-C
aborts at once. Work after training that keeps nothing worth a checkpoint (downstream scoring) is stopped at once
instead (`PreemptionFlag(stops=...)` raises lmpt.stopping.Stopped) and leaves the same way.

Under submitit (`hydra/launcher=slurm`) the job's own handler for SIGUSR2, the signal SLURM sends ahead of the time
limit or on preemption, requeues the job. lmpt's flag sits in front of it while training; once the checkpoint is
committed the signal is handed over, and submitit requeues the job into the same run directory."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any, NoReturn

from lmpt.config.resume import resume_command
from lmpt.console import console
from lmpt.errors import LmptError
from lmpt.rundir.directory import write_status
from lmpt.stopping import EXIT_PREEMPTED, Stopped

Handler = Callable[[int, FrameType | None], Any] | int | None
"""A signal's handler as `signal.signal` takes and returns it (a function, SIG_DFL or SIG_IGN, or None)."""

SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2)


class NotRequeued(LmptError):
    """The job's own handler (submitit past `max_num_timeout`) declined to requeue it: the run stopped with a
    committed checkpoint, and the same command resumes it."""


class PreemptionFlag:
    """Installed for the duration of training; `requested` is checked after every optimizer step. `stops`: the work
    the flag stops at once instead (e.g. "the downstream scoring"), by raising lmpt.stopping.Stopped from the
    handler; the work's catch site asks `requested`, whatever exception the stop became on the way out."""

    def __init__(self, stops: str | None = None) -> None:
        self.signal: signal.Signals | None = None
        """The stop signal received, if any."""
        self.stops = stops
        self._previous: dict[int, Handler] = {}

    @property
    def requested(self) -> bool:
        return self.signal is not None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt  # the second Ctrl-C: abort now
        self.signal = signal.Signals(signum)
        if self.stops is not None:
            console.print(f"[bold yellow]{self.signal.name}: stopping {self.stops}, then exiting[/]")
            raise Stopped(self.signal)
        console.print(f"[bold yellow]{self.signal.name}: finishing this step, saving a checkpoint, then exiting[/]")

    def __enter__(self) -> PreemptionFlag:
        if threading.current_thread() is threading.main_thread():  # signals can only be handled there
            for sig in SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def hand_over(self) -> None:
        """Pass the stop signal on to the handler lmpt's stood in front of, if the process had one of its own
        (submitit's, which requeues the job and exits); otherwise do nothing. A handler that declines to requeue
        (submitit once `max_num_timeout` is used up) ends the job with one line; the checkpoint stands."""
        previous = self._previous.get(self.signal) if self.signal is not None else None
        if self.signal is None or not callable(previous) or previous is signal.default_int_handler:
            return
        owner = getattr(previous, "__qualname__", repr(previous))
        console.print(f"handing {self.signal.name} to the job's own handler ({owner})")
        try:
            previous(self.signal, None)
        except Exception as exc:  # submitit past max_num_timeout: "Job not requeued because: timed-out too many..."
            raise NotRequeued(f"{owner} did not requeue the job ({exc}): run the same command to resume") from exc


def stop_for_requeue(
    flag: PreemptionFlag, run_dir: Path, step: int, wall_s: float, world_size: int, said: str = "", **fields: object
) -> NoReturn:
    """Rank 0 after a graceful stop: status.json says preempted (with `fields`, e.g. the phase it stopped in), the
    signal goes to the job's own handler (under submitit it requeues the job and exits), and the process exits with
    EXIT_PREEMPTED and the resume command. `said`: what stopped, for the console (default: training, at `step`)."""
    write_status(run_dir, "preempted", step=step, wall_s=wall_s, **fields)
    console.print(said or f"stopped at step {step} with a committed checkpoint")
    flag.hand_over()
    console.print(f"to resume: {resume_command(run_dir, world_size)} (exit code {EXIT_PREEMPTED})")
    sys.exit(EXIT_PREEMPTED)
