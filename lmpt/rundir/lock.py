"""One run per directory: the process that trains in a run directory holds an exclusive lock on RUN/.lock
for as long as it lives (the kernel releases it when the process ends, however it ends). A second process
is refused in one line naming the holder's PID. Under torchrun only rank 0 takes it, for the whole job."""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO

from lmpt.errors import LmptError
from lmpt.locks import holder, try_lock

LOCK_FILE = ".lock"
_held: dict[Path, IO[str]] = {}  # open for the life of the run: closing the file releases the lock


def lock_run_dir(run_dir: Path) -> None:
    """Take `run_dir`'s lock for this process (a no-op if it already holds it); LmptError if another holds it."""
    run_dir = run_dir.resolve()
    if run_dir in _held:
        return
    handle = try_lock(run_dir / LOCK_FILE)  # held open until release_run_dirs
    if handle is None:
        raise LmptError(
            f"{run_dir} is in use by another lmpt process (PID {holder(run_dir / LOCK_FILE) or 'unknown'}): wait "
            "for it to end or stop it, or give this run its own hydra.run.dir"
        )
    handle.truncate(0)
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    _held[run_dir] = handle


def release_run_dirs() -> None:
    """Release every run directory this process holds (a sweep's jobs run one after another in one process)."""
    while _held:
        _, handle = _held.popitem()
        handle.close()


def lock_for_job(run_dir: Path, ctx) -> None:
    """Rank 0 takes the lock for every rank of the job (`ctx`: lmpt.train.distributed.Distributed); a refusal is
    raised on every rank, so none is left waiting in a collective."""
    error = None
    if ctx.is_main:
        try:
            lock_run_dir(run_dir)
        except LmptError as exc:
            error = str(exc)
    error = ctx.broadcast_object(error)
    if error is not None:
        raise LmptError(str(error))
