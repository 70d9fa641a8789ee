"""Where a study's runs train side by side: its slots, checked before any work. A slot holds one run at a time:

- on a CPU, a group of cores (this process's affinity split into `study.slots` groups): the run is pinned to its group
  and takes as many intra-op threads as the group has cores (LMPT_THREADS, which lmpt.train.placement obeys first);
- on a GPU, one visible GPU: the run sees only it (CUDA_VISIBLE_DEVICES), and takes an equal share of the cores as
  its threads;
- under `study.launcher=slurm`, one SLURM job at a time (submitit; lmpt.study.slurm_jobs): `study.slots` bounds how
  many of the study's jobs are queued at once.

The runs' recipes are fixed before any run (lmpt.study.space), so the slots change when a run trains, never what it
trains: the records are those of the serial study, in any order of completion."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from lmpt.cores import core_groups, describe_cores, usable_cores
from lmpt.errors import LmptError
from lmpt.study.schema import StudyConfig
from lmpt.train.placement import FORCE_VAR

GPUS_VAR = "LMPT_STUDY_GPUS"
"""The GPUs a study's slots use, as CUDA_VISIBLE_DEVICES names them (`0,1,3`); unset: every GPU torch sees. Also the
seam the tests fill with a fake list on a machine without GPUs."""
LAUNCHERS = ("local", "slurm")
SLOT_DEVICES = ("auto", "cpu", "gpu")
SLURM_AUTO = 256
"""How many SLURM jobs study.slots=auto queues at once (submitit's own default bound on a job array)."""


@dataclass(frozen=True)
class Slot:
    """One place a run trains: the environment it adds to the run's and, on a CPU, the cores it is pinned to."""

    name: str
    """In words, for the console: "cores 0-3", "GPU 1", "SLURM"."""
    env: dict[str, str] = field(default_factory=dict)
    cores: frozenset[int] | None = None
    """The CPU affinity of the run (None: left as the study's)."""


def visible_gpus(env: Mapping[str, str] | None = None) -> list[str]:
    """The GPUs the study may use, by the name CUDA_VISIBLE_DEVICES gives each: LMPT_STUDY_GPUS when set, else
    torch's devices (through the study's own CUDA_VISIBLE_DEVICES, when it has one)."""
    env = os.environ if env is None else env
    given = env.get(GPUS_VAR, "").strip()
    if given:
        return [g.strip() for g in given.split(",") if g.strip()]
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    names = [n.strip() for n in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if n.strip()]
    return names[:count] if names else [str(i) for i in range(count)]


def _count(value: object, most: int, what: str) -> int:
    """study.slots as a number of slots (auto: `most`); more than `most` refused in one line naming `what`."""
    text = str(value).strip()
    if text == "auto":
        return most
    if not text.isdecimal() or int(text) < 1:
        raise LmptError(f"study.slots={text} is no number of slots: give a whole number of at least 1, or auto")
    if int(text) > most:
        raise LmptError(f"study.slots={text} asks for more slots than {what}: give at most {most}, or study.slots=auto")
    return int(text)


def plan_slots(study: StudyConfig, cores: Callable[[], list[int]] | None = None) -> list[Slot]:
    """The slots `study` (its `slots`, `slot_device` and `launcher`) asks for on this machine; LmptError (one line,
    exit 2) for more slots than cores or GPUs, a GPU slot on a machine without one, or a SLURM study without
    submitit. `cores`: this process's usable cores (default: its CPU affinity)."""
    launcher, device = str(study.launcher), str(study.slot_device)
    if launcher not in LAUNCHERS:
        raise LmptError(f"study.launcher={launcher} must be one of {', '.join(LAUNCHERS)}")
    if device not in SLOT_DEVICES:
        raise LmptError(f"study.slot_device={device} must be one of {', '.join(SLOT_DEVICES)}")
    if launcher == "slurm":
        from lmpt.study.slurm_jobs import require_submitit

        require_submitit()
        text = str(study.slots).strip()
        if text != "auto" and (not text.isdecimal() or int(text) < 1):
            raise LmptError(f"study.slots={text} is no number of jobs: give a whole number of at least 1, or auto")
        return [Slot("SLURM")] * (int(text) if text != "auto" else SLURM_AUTO)
    gpus = visible_gpus() if device != "cpu" else []
    if device == "gpu" and not gpus:
        raise LmptError(
            f"study.slot_device=gpu but this machine shows no GPU (torch sees none and {GPUS_VAR} is "
            "unset): drop study.slot_device, or give study.slot_device=cpu"
        )
    mine = sorted(cores() if cores is not None else _affinity())
    if gpus:
        n = _count(study.slots, len(gpus), f"the {len(gpus)} visible GPU(s) ({','.join(gpus)})")
        share = str(max(1, len(mine) // n))  # the host threads of runs side by side: an equal share of the cores
        return [Slot(f"GPU {g}", {"CUDA_VISIBLE_DEVICES": g, FORCE_VAR: share}) for g in gpus[:n]]
    n = _count(study.slots, len(mine), f"the {len(mine)} core(s) this process may run on")
    if n == 1:  # the serial study: each run takes its threads as lmpt alone does
        return [Slot("serial")]
    return [Slot(describe_cores(g), {FORCE_VAR: str(len(g))}, frozenset(g)) for g in core_groups(mine, n)]


def _affinity() -> list[int]:
    """This process's usable cores by number (their count alone where the platform tells no affinity)."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(usable_cores()))
