"""The run resolved once at start-up: `resolve(cfg)` checks the composed config, adopts `model.init_from`'s
architecture, and returns a read-only `RunSpec`; every stage after it takes the typed section it uses."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from functools import cached_property

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from lmpt.config.budget import Budget, parse_budget
from lmpt.config.quality_schema import QualityConfig
from lmpt.config.schema import (
    DataConfig,
    DownstreamConfig,
    ModelConfig,
    OptimizerConfig,
    SchedulerConfig,
    TokenizerConfig,
    TrainerConfig,
    settings,
)
from lmpt.config.validate import validate_config
from lmpt.objectives.registry import preflight_objective
from lmpt.objectives.schema import ObjectiveConfig
from lmpt.train.budget import refuse_two_lengths
from lmpt.train.init_from import Origin, adopt_origin, read_origin


@dataclass(frozen=True)
class RunSpec:
    """What a run is, resolved: the config it records (read-only, `model.init_from`'s keys adopted), the source of
    its starting weights, and the keys the user set on the command line. Each section is an instance of its schema
    dataclass (lmpt.config.schema.settings: the objective's and the optimizer's their own class), read once from the
    read-only config: what every stage after start-up takes."""

    config: DictConfig
    """The whole resolved config: what the run directory and each checkpoint record, and what drift compares."""
    origin: Origin | None
    """model.init_from's source, read (its weights only once first needed), or None."""
    given: frozenset[str]
    """Config keys set on the command line (not by conf/'s defaults)."""

    @cached_property
    def trainer(self) -> TrainerConfig:
        return settings(self.config.trainer, TrainerConfig)

    @cached_property
    def data(self) -> DataConfig:
        return settings(self.config.data, DataConfig)

    @cached_property
    def tokenizer(self) -> TokenizerConfig:
        return settings(self.config.tokenizer, TokenizerConfig)

    @cached_property
    def objective(self) -> ObjectiveConfig:
        """The objective's own config class (e.g. MlmConfig), an ObjectiveConfig."""
        return settings(self.config.objective, ObjectiveConfig)

    @cached_property
    def model(self) -> ModelConfig:
        return settings(self.config.model, ModelConfig)

    @cached_property
    def optimizer(self) -> OptimizerConfig:
        """The optimizer's own config class (MuonConfig, AdamWConfig, AdafactorConfig)."""
        return settings(self.config.optimizer, OptimizerConfig)

    @cached_property
    def scheduler(self) -> SchedulerConfig:
        return settings(self.config.scheduler, SchedulerConfig)

    @cached_property
    def downstream(self) -> DownstreamConfig:
        return settings(self.config.downstream, DownstreamConfig)

    @cached_property
    def quality(self) -> QualityConfig:
        return settings(self.config.quality, QualityConfig)

    @cached_property
    def record(self) -> dict:
        """The config as plain data, interpolations resolved: what a checkpoint and a logger store."""
        return OmegaConf.to_container(self.config, resolve=True, enum_to_str=True)  # type: ignore[return-value]

    @property
    def budget(self) -> Budget | None:
        return parse_budget(self.trainer.budget)


def given_keys() -> set[str]:
    """The config keys set on this launch's command line (Hydra's task overrides)."""
    return {o.split("=", 1)[0].lstrip("+~") for o in HydraConfig.get().overrides.task}


def resolve(cfg: DictConfig, given: set[str]) -> RunSpec:
    """Check every key and value, read model.init_from's source and take its architecture (keys not in `given`),
    and check the objective's settings; `cfg` itself is left as composed. Raises LmptError on bad input."""
    validate_config(cfg)
    t = cfg.trainer
    refuse_two_lengths(t.max_steps, t.budget, given)
    origin = read_origin(cfg.model.init_from) if cfg.model.init_from else None
    config = adopt_origin(cfg, origin, given) if origin is not None else copy.deepcopy(cfg)
    preflight_objective(config.objective, config.tokenizer, config.data.seq_len, config.model.arch)
    OmegaConf.set_readonly(config, True)
    return RunSpec(config, origin, frozenset(given))
