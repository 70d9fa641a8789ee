"""Advisory file locks between lmpt processes on one machine (`fcntl.flock`): a run directory, a study directory, a
quality stage's work folder, a sweep job's GPU or core group. A lock lives as long as its holder keeps the file open,
and the kernel releases it however the holder ends, so a stale lock never outlives a killed process. The one place
lmpt takes, waits for or probes a lock."""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from lmpt.console import info


def try_lock(path: Path, mode: str = "a+") -> IO[str] | None:
    """`path` opened (in `mode`) and locked exclusively for this process, or None when another process holds it. The
    caller keeps the handle open for as long as it holds the lock; closing it releases the lock."""
    handle = open(path, mode)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    return handle


@contextlib.contextmanager
def held(path: Path, waiting: str = "") -> Iterator[None]:
    """`path` locked exclusively for the body, waiting for another holder to end (saying `waiting` first, when
    given, through lmpt's console)."""
    with open(path, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if waiting:
                info(waiting)
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def holder(path: Path) -> str | None:
    """What the process holding `path`'s lock wrote into it (lmpt writes its PID), "" when it wrote nothing, None
    when no process holds it (or there is no such file). Probing takes no lock that lasts."""
    if not path.exists():
        return None
    with open(path) as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return handle.read().strip()
    return None
