"""Which GPU a sweep job runs on when several jobs share one machine (hydra/launcher=parallel)."""

from __future__ import annotations

import fcntl
import os
import tempfile
from typing import IO

import torch
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode

_held: list[IO] = []  # open lock files: the claim lasts as long as the job's process holds them


def claim_free_gpu() -> int | None:
    """The first GPU no other job on this machine holds, locked for the rest of this process; None if all are
    taken or there is none. Locks are released by the OS when the process ends, however it ends."""
    for index in range(torch.cuda.device_count()):
        lock = open(os.path.join(tempfile.gettempdir(), f"lmpt-gpu-{index}.lock"), "w")  # noqa: SIM115
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            continue
        _held.append(lock)
        return index
    return None


def release_gpus() -> None:
    while _held:
        _held.pop().close()


def sweeping_in_parallel() -> bool:
    hydra = HydraConfig.get()
    return hydra.mode == RunMode.MULTIRUN and "Joblib" in str(hydra.launcher.get("_target_", ""))
