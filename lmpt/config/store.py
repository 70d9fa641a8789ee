"""Registers the schemas with Hydra's ConfigStore and finds the conf/ directory.

Schemas live under `schema/<group>` so they never show up as choices of the groups themselves;
each yaml in conf/<group>/ starts from its schema (`- /schema/<group>/<name>@_here_`). The objective group's
schemas live beside their objectives (lmpt.objectives.registry.register_objective_schemas registers them)."""

from __future__ import annotations

from pathlib import Path

from hydra.core.config_store import ConfigStore

from lmpt.config import schema as s
from lmpt.config.quality_schema import QualityConfig

_SCHEMAS: dict[str, dict[str, type]] = {
    "tokenizer": {"sentencepiece": s.TokenizerConfig},
    "model": {"model": s.ModelConfig},
    "optimizer": {"adamw": s.AdamWConfig, "adafactor": s.AdafactorConfig, "muon": s.MuonConfig},
    "scheduler": {"scheduler": s.SchedulerConfig},
    "data": {"data": s.DataConfig},
    "trainer": {"trainer": s.TrainerConfig},
    "downstream": {"downstream": s.DownstreamConfig},
    "quality": {"quality": QualityConfig},
}


def register_schemas() -> None:
    """Every group's schema but the objectives' (the config layer does not import lmpt.objectives)."""
    cs = ConfigStore.instance()
    cs.store(name="lmpt_schema", node=s.LmptConfig)
    for group, nodes in _SCHEMAS.items():
        for name, node in nodes.items():
            cs.store(group=f"schema/{group}", name=name, node=node)


def conf_dir() -> Path:
    """conf/ inside an installed wheel (lmpt/conf), else the checkout's top-level conf/."""
    package = Path(__file__).resolve().parent.parent
    installed = package / "conf"
    return installed if installed.is_dir() else package.parent / "conf"
