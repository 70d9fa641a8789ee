"""Graceful preemption: SIGTERM, SIGINT and SIGUSR1 only raise a flag; the loop finishes the optimizer step,
commits a checkpoint and exits with EXIT_PREEMPTED so a scheduler can requeue the job. A second Ctrl-C
aborts at once."""

from __future__ import annotations

import signal
import threading
from types import FrameType

from lmpt.console import console

EXIT_PREEMPTED = 75
"""Exit code after a graceful stop (EX_TEMPFAIL: "try again later"); requeue the job and it resumes."""

SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1)


class PreemptionFlag:
    """Installed for the duration of training; `requested` is checked after every optimizer step."""

    def __init__(self) -> None:
        self.requested: str | None = None
        self._previous: dict[int, object] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if self.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt  # the second Ctrl-C: abort now
        self.requested = name
        console.print(f"[bold yellow]{name}: finishing this step, saving a checkpoint, then exiting[/]")

    def __enter__(self) -> PreemptionFlag:
        if threading.current_thread() is threading.main_thread():  # signals can only be handled there
            for sig in SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
