"""The lmpt config composed in process, as `lmpt OVERRIDE ...` composes it (schemas and resolvers registered)."""

from __future__ import annotations

from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from lmpt.config.resolvers import register_resolvers
from lmpt.config.store import conf_dir, register_schemas
from lmpt.objectives.registry import register_objective_schemas


def composed(*overrides: str, return_hydra_config: bool = False) -> DictConfig:
    register_schemas()
    register_objective_schemas()
    register_resolvers()
    with initialize_config_dir(str(conf_dir()), version_base=None):
        return compose("config", overrides=list(overrides), return_hydra_config=return_hydra_config)
