"""The study's runs in flight over its slots (lmpt.study.slots): local child processes, each pinned to its slot's
cores or GPU, or SLURM jobs. A pool starts a run on a free slot, waits until some run ends, and on a stop signal
passes it on to its runs (each saves a checkpoint and exits) before the study stops. STUDY/.running names the runs
in flight, so a study killed outright leaves none training unseen (lmpt.study.launch.stop_left_run)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lmpt.console import console
from lmpt.errors import LmptError
from lmpt.study.launch import StudyStopped, lock_holder, stop_with_study, write_running
from lmpt.study.slots import Slot

SLURM_POLL_S = 5.0
"""How often a SLURM study asks whether its jobs ended (submitit caches SLURM's answers about as long)."""


@dataclass(frozen=True)
class Launch:
    """One run the study trains: a search trial (`trial` its index) or a final run (`budget` and `seed`)."""

    name: str
    """In words, for the console: "search clm trial 1/6", "final clm seed 0 at 1e13flops"."""
    path: Path
    command: list[str]
    objective: str
    trial: int | None = None
    budget: str | None = None
    seed: int | None = None


def _start_in_slot(slot: Slot) -> None:
    """In the child, before lmpt starts: stop when the study dies (Linux), and keep to the slot's cores."""
    stop_with_study()
    if slot.cores is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, slot.cores)


class LocalPool:
    """Runs as child processes of the study, one per slot. One slot: the run's output is the study's, as a serial
    study shows it; several: each run's console is its own lmpt.log, and the study says when each starts and ends."""

    def __init__(self, study_dir: Path, slots: list[Slot]) -> None:
        self.study_dir = study_dir
        self.slots = slots
        self._busy: dict[int, tuple[Launch, subprocess.Popen]] = {}

    @property
    def free(self) -> int:
        return len(self.slots) - len(self._busy)

    @property
    def side_by_side(self) -> bool:
        """Whether runs may train at once (the console then says where each runs and when it ends)."""
        return len(self.slots) > 1

    @property
    def running(self) -> int:
        return len(self._busy)

    def start(self, launch: Launch) -> str:
        """Start `launch` on a free slot; the slot's name. A run directory another process holds is refused."""
        holder = lock_holder(launch.path)
        if holder is not None:
            raise LmptError(
                f"{launch.path} is in use by another lmpt process (PID {holder}): wait for it to end or "
                "stop it, then run the same command"
            )
        index = next(i for i in range(len(self.slots)) if i not in self._busy)
        slot = self.slots[index]
        quiet = len(self.slots) > 1  # runs side by side: their progress lines would interleave
        child = subprocess.Popen(  # noqa: PLW1509
            launch.command,
            env={**os.environ, **slot.env},
            preexec_fn=(lambda: _start_in_slot(slot)) if sys.platform.startswith("linux") else None,
            stdout=subprocess.DEVNULL if quiet else None,
        )
        self._busy[index] = (launch, child)
        self._write()
        return slot.name

    def wait(self) -> list[tuple[Launch, int | None]]:
        """Block until at least one run ends; the runs that ended, with their exit codes."""
        while True:
            ended = [(i, launch, child.poll()) for i, (launch, child) in self._busy.items()]
            done = [(i, launch, code) for i, launch, code in ended if code is not None]
            if done:
                for i, _, _ in done:
                    del self._busy[i]
                self._write()
                return [(launch, code) for _, launch, code in done]
            self._block()

    def _block(self) -> None:
        """Sleep until a child process ends (without reaping it: Popen reads its code), or briefly elsewhere."""
        if len(self._busy) == 1:
            ((_, child),) = self._busy.values()
            child.wait()
            return
        try:
            os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOWAIT)
        except (AttributeError, ChildProcessError):
            time.sleep(0.2)
            return
        time.sleep(0.01)  # a child of another kind ended: do not spin on it

    def stop(self) -> None:
        """On a stop signal: each run is told to stop (SIGTERM: it saves a checkpoint), then waited for."""
        for _, child in self._busy.values():
            with contextlib.suppress(ProcessLookupError):
                child.send_signal(signal.SIGTERM)  # a Ctrl-C reached it already: a SIGTERM beside it does not abort it
        for i, (_, child) in list(self._busy.items()):
            with contextlib.suppress(StudyStopped):  # a second signal: the run still ends on its own
                child.wait()
            if child.poll() is not None:  # a run still saving its checkpoint stays named for the next launch
                del self._busy[i]
        self._write()

    def _write(self) -> None:
        write_running(
            self.study_dir, [{"pid": child.pid, "run": str(launch.path)} for launch, child in self._busy.values()]
        )


class SlurmPool:
    """Runs as SLURM jobs through submitit, at most `slots` queued or running at once."""

    def __init__(self, study_dir: Path, slots: int, parameters: dict[str, Any]) -> None:
        from lmpt.study.slurm_jobs import JOBS_FOLDER, make_executor

        self.study_dir = study_dir
        self.slots = slots
        self.executor = make_executor(study_dir / JOBS_FOLDER, parameters)
        self._jobs: list[tuple[Launch, Any]] = []

    @property
    def free(self) -> int:
        return self.slots - len(self._jobs)

    side_by_side = True

    @property
    def running(self) -> int:
        return len(self._jobs)

    def start(self, launch: Launch) -> str:
        """Submit `launch` as a job; its name ("SLURM job ID")."""
        from lmpt.study.slurm_jobs import SlurmRun

        try:
            job = self.executor.submit(SlurmRun(launch.command))
        except Exception as exc:  # sbatch's refusal, raised by submitit with sbatch's stderr
            from lmpt.train.slurm import sbatch_refusal

            raise LmptError(sbatch_refusal(exc) or f"sbatch failed: {str(exc).strip().splitlines()[-1]}") from None
        self._jobs.append((launch, job))
        self._write()
        return f"SLURM job {job.job_id}"

    def wait(self) -> list[tuple[Launch, int | None]]:
        """Block until at least one job ends; the runs whose jobs ended (their exit codes are in their records)."""
        while True:
            ended = [job.done() for _, job in self._jobs]
            if any(ended):
                done = [launch for (launch, _), end in zip(self._jobs, ended, strict=True) if end]
                self._jobs = [pair for pair, end in zip(self._jobs, ended, strict=True) if not end]
                self._write()
                return [(launch, None) for launch in done]
            time.sleep(SLURM_POLL_S)

    def stop(self) -> None:
        """On a stop signal: the jobs are SLURM's and keep going; STUDY/.running names them, and the same command
        waits for them before it resumes the study."""
        if self._jobs:
            console.print(
                f"{len(self._jobs)} SLURM job(s) keep running: {', '.join(job.job_id for _, job in self._jobs)}"
            )

    def _write(self) -> None:
        write_running(self.study_dir, [{"job": job.job_id, "run": str(launch.path)} for launch, job in self._jobs])
