"""Schema of `lmpt-study`'s own keys (`study.*`), composed beside an ordinary run's config groups: the run keys
given on the command line (model, data, tokenizer, trainer.budget, downstream, ...) are handed to every run of the
study, the `study.*` keys say what the study compares and how it searches."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, ListConfig, OmegaConf

from lmpt.config.schema import LmptConfig

SCHEMA_NAME = "lmpt_study_schema"


@dataclass
class StudyConfig:
    objectives: list[str] = field(default_factory=list)
    """The objectives compared (conf/study.yaml: clm, mlm and gpt-bert); each is searched, then trained at its chosen
    recipe for every seed."""
    run_keys: list[str] = field(default_factory=list)
    """Run keys handed to every run of the study before the command line's, which win over them key by key
    (conf/study.yaml sets the default study scale here: data, precision, budget, tasks)."""
    budgets: list[str] = field(default_factory=list)
    """trainer.budget values the final runs train at (every objective and seed at each); empty = trainer.budget
    alone. The search runs once, at study.search_fraction of the largest, and its recipe trains at every budget; the
    gain over the untrained control is reported at each budget. trainer.budget on the command line replaces them (a
    study at that one budget)."""
    seeds: list[int] = field(default_factory=lambda: [0])
    """Pre-training seeds (trainer.seed) of the final runs; the search trains at the first."""
    dir: str = "study"
    """The study's directory (relative to the launch directory): search trials, final runs, study.json and
    study.md. The same command resumes a killed study there."""
    trials: int = 8
    """Learning-rate trials per objective (the same number for every objective)."""
    search_fraction: float = 0.25
    """Share of trainer.budget each search trial trains for."""
    min_search_steps: int = 10
    """The fewest optimizer steps a search trial may take; a smaller search budget is refused before any work."""
    sampler: str = "random"
    """How the trials' recipes are drawn: random, every trial's recipe drawn before any runs (the same recipes for
    every objective, whatever order the trials finish in). tpe, which picks each trial from those finished before it,
    is refused."""
    search_seed: int = 0
    """Seed of the recipes' draw (the same for every objective)."""
    space: Any = None
    """The search space, {KEY: EXPRESSION} in Hydra's sweep syntax: interval(LOW, HIGH), tag(log, interval(LOW,
    HIGH)) or choice(A, B, ...); empty = by optimizer: muon searches optimizer.lr in [5e-3, 0.2] and
    optimizer.adamw_lr in [2e-3, 0.1], adamw and adafactor optimizer.lr in [1e-4, 1e-2] (log-uniform each). Typed
    Any, so `study.space={...}` sets it without a `+` (a typed dict under Hydra's struct mode takes no new key)."""
    slots: str = "1"
    """How many runs train at once: a number, or auto (every visible GPU; on a CPU every core, one core a run; under
    SLURM every run queued at once). 1 = one run after another, each taking its threads as lmpt alone does. On a CPU
    the cores are split into study.slots groups, each run pinned to its group with as many threads as it has cores.
    The records are the same in any order the runs end."""
    slot_device: str = "auto"
    """What a slot holds: gpu (one visible GPU a run, CUDA_VISIBLE_DEVICES; LMPT_STUDY_GPUS=0,1 picks them), cpu (a
    group of cores), or auto (gpu where one is visible, else cpu)."""
    launcher: str = "local"
    """Where the runs train: local (child processes of the study) or slurm (each run a SLURM job through submitit,
    `pip install "lmpt[slurm]"`; study.slots bounds how many are queued at once, and the study waits for them)."""
    probe: bool = True
    """How the dry run times runs on CPU slots: true, each model at its rate measured by a short probe run in such a
    slot (about 15 s a model, once, then cached: lmpt.study.rates); false, at 40% of the matmul peak, instant and,
    for the small models a CPU trains, 10-25 times too short."""
    slurm: Any = None
    """The SLURM jobs' sbatch options under study.launcher=slurm, by submitit's SlurmExecutor names, e.g.
    study.slurm={partition:gpu,time:240,cpus_per_task:8,gpus_per_node:1,max_num_timeout:20}; empty: 4 hours, one
    CPU (and one GPU under study.slot_device=gpu). A run takes its job's CPUs as its threads."""


@dataclass
class StudyAppConfig(LmptConfig):
    study: StudyConfig = field(default_factory=StudyConfig)


def study_keys(*, _root_: DictConfig) -> str:
    """`lmpt-study --help`'s list of the study keys and the values the study runs with: conf/study.yaml's, with the
    command line's (`_root_`: the composed config the help is rendered from)."""
    study = _root_.study
    lines = []
    for f in fields(StudyConfig):
        value = study.get(f.name)
        if isinstance(value, ListConfig):
            shown = f"[{','.join(map(str, value))}]"
        elif isinstance(value, DictConfig):
            shown = "{" + ",".join(f"{k!s}:'{v}'" for k, v in value.items()) + "}"
        else:
            shown = {"space": "{}  (empty: the optimizer's default space)", "slurm": "{}"}.get(f.name, str(value))
            shown = shown if value is None else str(value)
        lines.append(f"  study.{f.name}={shown}")
    return "\n".join(lines)


def register_study_schema() -> None:
    """The study's root schema (an lmpt run's groups plus `study`) in Hydra's ConfigStore, and its help's key list."""
    ConfigStore.instance().store(name=SCHEMA_NAME, node=StudyAppConfig)
    if not OmegaConf.has_resolver("lmpt.study_keys"):
        OmegaConf.register_new_resolver("lmpt.study_keys", study_keys)
