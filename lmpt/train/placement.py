"""Where a job trains: its device and precision, its CPU threads, and which GPU, or which group of cores, a sweep
job runs on when several jobs share one machine (hydra/launcher=parallel).

A run's intra-op threads are the count its slot gives it, else the cores free of other work, so that runs side by
side (a study's slots, a test suite beside a run, two users on one machine) do not oversubscribe the cores (two runs
each taking every core of 2 crawl 10-25 times slower than one alone). In order, the first that is set wins:
- `LMPT_THREADS`: the count a slot (lmpt-study, a launcher, a script) or the user forces;
- `OMP_NUM_THREADS`: the user's usual knob, which torch has already obeyed;
- the cores this process may run on (its CPU affinity: a slot's group of cores) less those other processes keep
  busy now (lmpt.cores.busy_cores), at least one."""

from __future__ import annotations

import dataclasses
import math
import os
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, NamedTuple

import torch
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode

from lmpt.config.schema import TrainerConfig
from lmpt.cores import busy_cores, core_groups, describe_cores, usable_cores
from lmpt.errors import LmptError
from lmpt.locks import try_lock
from lmpt.train.distributed import Distributed, rank_device
from lmpt.train.precision import Precision, pick_device, pick_precision

CUBLAS_WORKSPACE = ":4096:8"
"""cuBLAS's workspace setting that makes its matmuls reproducible: PyTorch's deterministic mode raises on a CUDA
matmul without it (or ":16:8")."""

_held: list[IO] = []  # open lock files: the claim lasts as long as the job's process holds them
_sweep_cores: list[int] = []  # the cores a sweep's worker process started with, before any job pinned it


def _claim(name: str) -> bool:
    """Lock `name` for this process unless another process on the machine holds it."""
    lock = try_lock(Path(tempfile.gettempdir()) / f"lmpt-{name}.lock")
    if lock is None:
        return False
    _held.append(lock)
    return True


def claim_free_gpu() -> int | None:
    """The first GPU no other job on this machine holds, locked for the rest of this process; None if all are
    taken or there is none. Locks are released by the OS when the process ends, however it ends."""
    return next((index for index in range(torch.cuda.device_count()) if _claim(f"gpu-{index}")), None)


def claim_free_cores(jobs: int) -> list[int] | None:
    """A group of cores no other job of a parallel sweep holds (the worker's cores split into `jobs` groups), this
    process pinned to it so that its threads are the group's; None if every group is held (the job then runs where
    it is, its threads the cores free of other work)."""
    if not _sweep_cores:
        _sweep_cores.extend(sorted(os.sched_getaffinity(0)))
    for group in core_groups(_sweep_cores, min(jobs, len(_sweep_cores))):
        if _claim(f"cores-{group[0]}-{group[-1]}"):
            os.sched_setaffinity(0, group)
            return group
    return None


def release_claims() -> None:
    """Give back the GPU or the cores this job claimed, and the worker's own cores, for the next job it runs."""
    _in_job.clear()
    while _held:
        _held.pop().close()
    if _sweep_cores:
        os.sched_setaffinity(0, _sweep_cores)


def stop_with_sweep() -> None:
    """In a parallel sweep's worker: when the sweep's process is gone (killed outright, `kill -9`), stop this job as
    a stop signal would (a checkpoint, then exit), so no worker trains on unseen, holding its cores' claim; the OS
    then releases the claim, and the next sweep finds the cores free. Watched once per worker, every second."""
    if _watched:
        return
    _watched.append(os.getppid())

    def watch() -> None:
        while os.getppid() == _watched[0]:  # a dead parent's children are handed to another process
            time.sleep(1.0)
        os.kill(os.getpid(), signal.SIGTERM)
        deadline = time.monotonic() + ORPHAN_GRACE_S
        while _in_job and time.monotonic() < deadline:  # the job saves a checkpoint and ends (release_claims)
            time.sleep(0.2)
        os._exit(EXIT_ORPHANED)  # the worker, with no sweep to serve, goes too

    threading.Thread(target=watch, name="lmpt-sweep-watch", daemon=True).start()


_watched: list[int] = []  # the sweep's process id, once a worker watches it
_in_job: list[bool] = []  # non-empty while this worker runs a job (place_job to release_claims)
ORPHAN_GRACE_S = 120.0
"""Seconds at most a worker whose sweep died gives its job to save a checkpoint and end before the worker exits."""
EXIT_ORPHANED = 75


def parallel_sweep_jobs() -> int:
    """How many jobs of this sweep run at once on this machine (hydra/launcher=parallel's n_jobs); 1 otherwise."""
    if not HydraConfig.initialized():  # called outside a Hydra app (a test, a notebook): no sweep
        return 1
    hydra = HydraConfig.get()
    if hydra.mode != RunMode.MULTIRUN or "Joblib" not in str(hydra.launcher.get("_target_", "")):
        return 1
    jobs = int(hydra.launcher.get("n_jobs") or 1)
    return jobs if jobs > 0 else max(1, (os.cpu_count() or 1) + 1 + jobs)  # joblib's -1: every core


class Placement(NamedTuple):
    """Where a job trains (`place_job`): its device, the precision there, and the intra-op threads it took."""

    device: torch.device
    precision: Precision
    threads: Threads


def place_job(trainer: TrainerConfig, ctx: Distributed, width: int | None = None) -> Placement:
    """The device this rank trains on (`trainer.device`; a GPU of its own for each job of a parallel sweep, or on a
    CPU a group of cores of its own when the sweep runs several jobs at once), the precision there, the intra-op
    threads it took (set before anything is measured or built), and PyTorch's deterministic mode as
    `trainer.deterministic` asks."""
    device = rank_device(pick_device(trainer.device), ctx)
    jobs = parallel_sweep_jobs() if not ctx.enabled else 1
    if jobs > 1:
        _in_job[:] = [True]
        stop_with_sweep()  # a worker never outlives its sweep
    cores = claim_free_cores(jobs) if device.type == "cpu" and jobs > 1 else None  # before the threads: the group's
    threads = take_threads()  # before the matmul peak and every kernel after it: they run with the slot's threads
    if cores is not None:
        threads = dataclasses.replace(threads, why=f"{describe_cores(cores)}, one of {jobs} parallel sweep jobs")
    if device.type == "cuda" and jobs > 1:
        index = claim_free_gpu()  # jobs running side by side each take a GPU of their own
        if index is not None:
            device = torch.device("cuda", index)
            torch.cuda.set_device(device)
    precision = pick_precision(trainer, device, width=width)  # width: the model's, for amp on a CPU
    if trainer.deterministic:  # cuBLAS refuses deterministic mode without a fixed workspace (read at each matmul)
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE)
    torch.use_deterministic_algorithms(trainer.deterministic, warn_only=False)
    return Placement(device, precision, threads)


FORCE_VAR = "LMPT_THREADS"
"""The environment variable that sets a run's thread count outright (a slot's, or the user's)."""

BUSY_ROUNDING = 0.35
"""Other work counts as a busy core from this share of one up: a core's idle fraction is noisy over a short sample."""


@dataclass(frozen=True)
class Threads:
    """The intra-op threads a run takes and why, in words for its start line."""

    count: int
    why: str

    def describe(self) -> str:
        """E.g. "1 thread (2 cores, 1 busy with other work)"."""
        return f"{self.count} thread{'s' * (self.count != 1)} ({self.why})"


def _forced(env: Mapping[str, str], name: str) -> int | None:
    """The positive count `name` holds in `env`, None when it is unset or empty; anything else refused in one line."""
    value = env.get(name, "").strip()
    if not value:
        return None
    if not value.isdecimal() or int(value) < 1:
        raise LmptError(f"{name}={value!r} is not a thread count: give a whole number of at least 1, or unset it")
    return int(value)


def _cores(n: int) -> str:
    return f"{n} core{'s' * (n != 1)}"


def choose_threads(
    env: Mapping[str, str],
    cores: Callable[[], int] = usable_cores,
    busy: Callable[[], float | None] = busy_cores,
) -> Threads:
    """The threads a run takes (see the module's docstring), from `env` and the cores' state now."""
    for name in (FORCE_VAR, "OMP_NUM_THREADS"):
        forced = _forced(env, name)
        if forced is not None:
            return Threads(forced, f"{name}={forced}")
    usable = cores()
    machine = os.cpu_count() or usable
    where = f"{_cores(usable)} of this process's affinity" if usable < machine else _cores(usable)
    load = busy()
    if load is None:
        return Threads(usable, f"{where}, their load unknown")
    taken = min(usable, math.floor(load + 1 - BUSY_ROUNDING))
    count = max(1, usable - taken)
    return Threads(count, f"{where}, {taken} busy with other work" if taken else f"{where}, all free")


def take_threads(env: Mapping[str, str] | None = None) -> Threads:
    """Choose the run's threads from `env` (default: this process's environment) and set them in torch."""
    threads = choose_threads(os.environ if env is None else env)
    if torch.get_num_threads() != threads.count:
        torch.set_num_threads(threads.count)
    return threads
