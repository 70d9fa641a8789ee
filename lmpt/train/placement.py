"""Where a job trains: its device and precision, its CPU threads (lmpt.train.threads: its slot's, or the cores free
of other work), and which GPU a sweep job runs on when several jobs share one machine (hydra/launcher=parallel)."""

from __future__ import annotations

import fcntl
import os
import tempfile
from typing import IO

import torch
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode

from lmpt.config.schema import TrainerConfig
from lmpt.train.distributed import Distributed, rank_device
from lmpt.train.precision import Precision, pick_device, pick_precision
from lmpt.train.threads import Threads, take_threads

CUBLAS_WORKSPACE = ":4096:8"
"""cuBLAS's workspace setting that makes its matmuls reproducible: PyTorch's deterministic mode raises on a CUDA
matmul without it (or ":16:8")."""

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


def place_job(trainer: TrainerConfig, ctx: Distributed) -> tuple[torch.device, Precision, Threads]:
    """The device this rank trains on (`trainer.device`; a GPU of its own for each job of a parallel sweep), the
    precision there, the intra-op threads it took (set before anything is measured or built), and PyTorch's
    deterministic mode as `trainer.deterministic` asks."""
    threads = take_threads()  # first: the matmul peak and every kernel after it run with the slot's threads
    device = rank_device(pick_device(trainer.device), ctx)
    if device.type == "cuda" and not ctx.enabled and sweeping_in_parallel():
        index = claim_free_gpu()  # jobs running side by side each take a GPU of their own
        if index is not None:
            device = torch.device("cuda", index)
            torch.cuda.set_device(device)
    precision = pick_precision(trainer, device)
    if trainer.deterministic:  # cuBLAS refuses deterministic mode without a fixed workspace (read at each matmul)
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE)
    torch.use_deterministic_algorithms(trainer.deterministic, warn_only=False)
    return device, precision, threads
