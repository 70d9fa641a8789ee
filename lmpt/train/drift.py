"""Resuming must continue the same experiment: only the keys in lmpt.config.resume.MAY_CHANGE (run length, logging,
evaluation, checkpointing, device, workers) may differ from the configuration the checkpoint was written with."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from lmpt.config.resume import MAY_CHANGE
from lmpt.errors import LmptError
from lmpt.train.checkpoint import load_part


def flatten(node: Any, prefix: str = "") -> dict[str, Any]:
    """A nested config container as {"section.key": value}."""
    if isinstance(node, dict):
        flat: dict[str, Any] = {}
        for key, value in node.items():
            flat.update(flatten(value, f"{prefix}{key}."))
        return flat
    return {prefix[:-1]: node}


def drifted_keys(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Flattened keys whose values differ (or exist on one side only), except those that may change on resume."""
    return sorted(k for k in old.keys() | new.keys() if k not in MAY_CHANGE and old.get(k) != new.get(k))


def refuse_drift(checkpoint: Path, cfg: DictConfig) -> None:
    saved = load_part(checkpoint, "trainer")["config"]
    old, new = flatten(saved), flatten(OmegaConf.to_container(cfg, resolve=True))
    keys = drifted_keys(old, new)
    if keys:
        changes = ", ".join(f"{k} ({old.get(k)!r} -> {new.get(k)!r})" for k in keys[:6])
        more = f" and {len(keys) - 6} more" if len(keys) > 6 else ""
        raise LmptError(
            f"cannot resume {checkpoint} with a different configuration: {changes}{more}. "
            "Only run length, logging, checkpointing and device keys may change; start a new run for the rest"
        )
