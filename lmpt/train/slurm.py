"""What lmpt reads from SLURM: the process group of an srun step (one task per rank), and sbatch's refusal of a
sweep's jobs turned into one line."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TextIO

PORT_BASE = 20000
PORT_SPAN = 20000


def first_hostname(node_list: str) -> str:
    """The first node of a SLURM node list (`node[01-04],gpu7` -> `node01`), as `scontrol show hostnames`
    expands it."""
    expanded = subprocess.run(
        ["scontrol", "show", "hostnames", node_list], capture_output=True, text=True, check=True, timeout=60
    ).stdout.split()
    return expanded[0]


def srun_task_env(environ: Mapping[str, str]) -> dict[str, str]:
    """torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) for a
    process that srun started as one of several tasks of a job step: SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID,
    the step's first node as the master, and a port derived from the job id (MASTER_ADDR and MASTER_PORT already
    in the environment win). Empty where torchrun already set them, outside a step (the batch script itself) or
    in a one-task step."""
    if "WORLD_SIZE" in environ or "SLURM_STEP_ID" not in environ or int(environ.get("SLURM_NTASKS", "1")) <= 1:
        return {}
    node_list = environ.get("SLURM_STEP_NODELIST") or environ["SLURM_JOB_NODELIST"]
    return {
        "RANK": environ["SLURM_PROCID"],
        "WORLD_SIZE": environ["SLURM_NTASKS"],
        "LOCAL_RANK": environ["SLURM_LOCALID"],
        "LOCAL_WORLD_SIZE": environ.get("SLURM_NTASKS_PER_NODE", environ["SLURM_NTASKS"]).split("(")[0],
        "MASTER_ADDR": environ.get("MASTER_ADDR") or first_hostname(node_list),
        "MASTER_PORT": environ.get("MASTER_PORT") or str(PORT_BASE + int(environ["SLURM_JOB_ID"]) % PORT_SPAN),
    }


def sbatch_refusal(exc: BaseException) -> str | None:
    """One line for a sweep whose jobs sbatch refused (submitit raises its stderr with the failed sbatch call as
    the cause), naming sbatch's reason and what to change; None for any other exception."""
    cause = exc.__cause__
    if not isinstance(cause, subprocess.CalledProcessError) or not cause.cmd:
        return None
    if Path(str(cause.cmd[0])).name != "sbatch":
        return None
    lines = [line.removeprefix("sbatch: error:").strip() for line in str(exc).splitlines() if line.strip()]
    reasons = [line.removeprefix("Batch job submission failed:").strip() for line in lines]
    reason = "; ".join(dict.fromkeys(reasons)) or f"exit code {cause.returncode}"
    lowered = reason.lower()
    if "gres" in lowered:
        advice = "this partition has no GPUs: use hydra/launcher=slurm_cpu (or hydra.launcher.gpus_per_node=null)"
    elif "invalid partition" in lowered:
        advice = "set hydra.launcher.partition to one that `sinfo` lists"
    elif "account" in lowered:
        advice = "set hydra.launcher.account (and partition) to ones you may use (`sacctmgr show assoc user=$USER`)"
    else:
        advice = (
            "ask for what the partition's nodes have (`sinfo -o '%P %c %m %G'`): hydra.launcher.cpus_per_task, "
            "mem_gb, gpus_per_node, nodes, tasks_per_node, timeout_min"
        )
    return f"sbatch refused the jobs: {reason}: {advice}"


class _WithoutSbatchEcho:
    """A stderr that drops the lines sbatch wrote (submitit prints them in one `print` call before raising them)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._dropping = False

    def write(self, text: str) -> int:
        after_dropped, self._dropping = self._dropping, text.startswith("sbatch: ")
        if self._dropping or (after_dropped and text == "\n"):
            return len(text)
        return self._stream.write(text)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


@contextlib.contextmanager
def without_sbatch_echo() -> Iterator[None]:
    """While launching: submitit echoes sbatch's refusal on stderr before raising it, and lmpt reports the raised
    error as one line (`sbatch_refusal`), so the echo is held back; everything else written passes through."""
    with contextlib.redirect_stderr(_WithoutSbatchEcho(sys.stderr)):
        yield
