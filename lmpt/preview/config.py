"""The preview's primary config: lmpt's composed run (conf/config.yaml) plus a typed `preview:` node.

It lives in the ConfigStore, so conf/ stays lmpt's alone; every lmpt group and override applies unchanged
and a typo under `preview.` fails like any other key."""

from __future__ import annotations

from dataclasses import dataclass, field

from hydra.core.config_store import ConfigStore

from lmpt.config.schema import LmptConfig
from lmpt.errors import LmptError

PRIMARY_CONFIG = "lmpt_preview"
SPLITS = ("val", "train")


@dataclass
class PreviewConfig:
    examples: int = 2
    """Examples shown."""
    step: int = 0
    """Training step whose random draws (corruption; with split=train also the windows) are shown."""
    split: str = "val"
    """Text the examples come from: val (the same held-out text for every objective) or train."""
    json: bool = False
    """Print one JSON document on stdout instead of the coloured view."""
    width: int = 0
    """Tokens shown per row in the coloured view; 0 = 64. JSON always holds whole examples."""


@dataclass
class PreviewAppConfig(LmptConfig):
    preview: PreviewConfig = field(default_factory=PreviewConfig)


def register_preview_config() -> None:
    """Store the schema and the primary config `lmpt_preview` (defaults: lmpt's config, then the schema)."""
    cs = ConfigStore.instance()
    cs.store(name="lmpt_preview_schema", node=PreviewAppConfig)
    cs.store(name=PRIMARY_CONFIG, node={"defaults": ["config", "lmpt_preview_schema", "_self_"]})


def check_preview_config(cfg: PreviewConfig) -> None:
    """Refuse preview options out of range (LmptError naming the key)."""
    if cfg.examples < 1:
        raise LmptError(f"preview.examples={cfg.examples} is invalid: it must be >= 1")
    if cfg.step < 0:
        raise LmptError(f"preview.step={cfg.step} is invalid: it must be >= 0")
    if cfg.split not in SPLITS:
        raise LmptError(f"preview.split={cfg.split!r} is invalid: it must be one of {', '.join(SPLITS)}")
    if cfg.width < 0:
        raise LmptError(f"preview.width={cfg.width} is invalid: it must be >= 0")
