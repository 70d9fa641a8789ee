"""A stop signal that ends work at once: the handler records the signal and raises `Stopped`, and the place that
ends the work asks which signal arrived (`stopped_by`), not which exception reached it.

The exception that reaches a command's catch site is not always the one the handler raised: a library's cleanup on
the way out can replace it with its own (OmegaConf does, when the signal lands while it builds a config), so a catch
site that matched `Stopped` alone printed a traceback and exited 1 for what was a stop. The catch sites are
`lmpt-prepare`, `lmpt-study` (planning and running), `lmpt-reproduce` and a run's downstream scoring
(`lmpt.train.preemption.PreemptionFlag(stops=...)`, which records its own signal)."""

from __future__ import annotations

import signal
from collections.abc import Iterable
from types import FrameType

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)

EXIT_PREEMPTED = 75
"""Exit code after a graceful stop (EX_TEMPFAIL: "try again later"); requeue the job and it resumes."""

EXIT_INTERRUPTED = 130
"""Exit code after an interrupt from the terminal (128 + SIGINT, the shell's convention)."""


class Stopped(BaseException):
    """A stop signal ended the work (a BaseException, as KeyboardInterrupt is: no `except Exception` swallows it)."""

    def __init__(self, sig: signal.Signals) -> None:
        self.signal = sig
        super().__init__(sig.name)


_received: signal.Signals | None = None
"""The stop signal this command received since `stop_on` installed its handler."""


def _raise_stopped(signum: int, frame: FrameType | None) -> None:
    global _received
    _received = signal.Signals(signum)
    raise Stopped(_received)


def stop_on(signals: Iterable[signal.Signals] = STOP_SIGNALS) -> None:
    """From now on each of `signals` raises Stopped in this process, wherever it is, and is recorded for
    `stopped_by`. Forgets a signal an earlier command in the same process received (tests run commands in
    process)."""
    global _received
    _received = None
    for sig in signals:
        signal.signal(sig, _raise_stopped)


def stopped_by() -> signal.Signals | None:
    """The stop signal received since `stop_on`, whatever exception it became on the way out; None: no stop."""
    return _received


def exit_code(sig: signal.Signals) -> int:
    """The exit code for work a stop signal ended: EXIT_PREEMPTED for a scheduler's SIGTERM (requeue the job and
    it resumes), EXIT_INTERRUPTED for anything else (a Ctrl-C)."""
    return EXIT_PREEMPTED if sig == signal.SIGTERM else EXIT_INTERRUPTED
