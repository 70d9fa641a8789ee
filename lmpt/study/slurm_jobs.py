"""A study's runs as SLURM jobs (`study.launcher=slurm`), through submitit (`pip install "lmpt[slurm]"`): each run is
one job that starts `python -m lmpt ...` into the run's own directory and waits for it. A job SLURM stops ahead of
its time limit or on preemption (SIGUSR2) lets its run commit a checkpoint, then submitit requeues it and the run
resumes in the same directory. The study waits for its jobs; a study stopped or killed leaves them to SLURM, and the
same command waits for those still queued or running before it resumes the rest."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from lmpt.errors import LmptError
from lmpt.train.placement import FORCE_VAR

JOBS_FOLDER = ".submitit"
"""STUDY/.submitit/JOB: submitit's files (the job's script, its logs) for each of the study's jobs."""
DEFAULT_PARAMETERS: dict[str, Any] = {"time": 240, "cpus_per_task": 1}
"""A job's sbatch options unless study.slurm gives them: 4 hours, one CPU (a GPU slot asks for one GPU too)."""


def require_submitit() -> None:
    """A SLURM study without submitit installed is refused in one line."""
    try:
        import submitit  # noqa: F401
    except ImportError:
        raise LmptError(
            "study.launcher=slurm sends each run to SLURM through submitit, which is not installed: "
            'pip install "lmpt[slurm]"'
        ) from None


def job_parameters(given: Any, gpu: bool) -> dict[str, Any]:
    """The sbatch options of every job: DEFAULT_PARAMETERS, one GPU for a GPU slot, then study.slurm's (submitit's
    SlurmExecutor names: partition, time, cpus_per_task, gpus_per_node, mem, account, ...); an unknown name or no
    SLURM here is refused in one line."""
    from submitit import SlurmExecutor

    parameters = {**DEFAULT_PARAMETERS, **({"gpus_per_node": 1} if gpu else {}), **dict(given or {})}
    unknown = sorted(set(parameters) - SlurmExecutor._valid_parameters() - {"max_num_timeout"})
    if unknown:
        raise LmptError(
            f"study.slurm: {', '.join(unknown)} is no sbatch option submitit knows: use partition, time, "
            "cpus_per_task, gpus_per_node, mem, account, signal_delay_s, max_num_timeout, ..."
        )
    with tempfile.TemporaryDirectory() as folder:  # a check only: the study's own folder is made once it runs
        try:
            make_executor(Path(folder), parameters)
        except (RuntimeError, ValueError, TypeError) as exc:
            raise LmptError(f"study.launcher=slurm: {exc}") from None
    return parameters


def make_executor(folder: Path, parameters: dict[str, Any]) -> Any:
    """A submitit SlurmExecutor writing into `folder`, its jobs sent with `parameters`."""
    from submitit import SlurmExecutor

    options = {k: v for k, v in parameters.items() if k != "max_num_timeout"}
    executor = SlurmExecutor(folder=str(folder / "%j"), max_num_timeout=int(parameters.get("max_num_timeout", 3)))
    executor.update_parameters(**options)
    return executor


class SlurmRun:
    """What a job runs: one lmpt run, as a child process, with the job's CPUs as its threads. submitit calls
    `checkpoint` on SIGUSR2 (a time limit or a preemption ahead): the run commits a checkpoint and exits, and the job
    is requeued to continue it in the same directory."""

    def __init__(self, command: list[str]) -> None:
        self.command = command
        self._child: subprocess.Popen | None = None

    def __call__(self) -> int:
        """Run the command to its end; its exit code (the run directory records the rest)."""
        env = dict(os.environ)
        env.setdefault(FORCE_VAR, os.environ.get("SLURM_CPUS_PER_TASK", "1"))  # the job's CPUs, not the node's
        self._child = subprocess.Popen(self.command, env=env)
        return self._child.wait()

    def checkpoint(self) -> Any:
        """Let the run commit its checkpoint and end (SLURM's SIGUSR2 reached it too; passed on in case it did
        not), then requeue the same run."""
        from submitit.helpers import DelayedSubmission

        if self._child is not None:
            with contextlib.suppress(ProcessLookupError):
                self._child.send_signal(signal.SIGUSR2)
            self._child.wait()
        return DelayedSubmission(SlurmRun(self.command))

    def __getstate__(self) -> dict[str, Any]:
        return {"command": self.command, "_child": None}  # a process does not travel with the job


def job_active(folder: Path, job_id: str) -> bool:
    """Whether the study's job `job_id` is still queued or running (SLURM's view, through submitit)."""
    from submitit import SlurmJob

    return not SlurmJob(folder=str(folder / "%j"), job_id=job_id).done()
