"""Resuming must continue the same experiment: only the keys in lmpt.config.resume.MAY_CHANGE (run length, logging,
evaluation, checkpointing, device, workers) may differ from the configuration the checkpoint was written with."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from lmpt.config.resume import MAY_CHANGE
from lmpt.config.schema import folded_tasks
from lmpt.errors import LmptError
from lmpt.rundir.checkpoint import load_part


def flatten(node: Any, prefix: str = "") -> dict[str, Any]:
    """A nested config container as {"section.key": value}."""
    if isinstance(node, dict):
        flat: dict[str, Any] = {}
        for key, value in node.items():
            flat.update(flatten(value, f"{prefix}{key}."))
        return flat
    return {prefix[:-1]: node}


_NO_DEFAULT = object()


def schema_default(cfg: DictConfig, key: str) -> Any:
    """The default the schema gives the flattened `key` of `cfg` (e.g. `[]` for data.sources), or a sentinel
    equal to nothing when its section is untyped or has no such field."""
    section, _, name = key.rpartition(".")
    node = OmegaConf.select(cfg, section) if section else None
    kind = OmegaConf.get_type(node) if isinstance(node, DictConfig) else None
    if kind is None or not dataclasses.is_dataclass(kind) or name not in {f.name for f in dataclasses.fields(kind)}:
        return _NO_DEFAULT
    defaults = OmegaConf.to_container(OmegaConf.structured(kind), enum_to_str=True)
    assert isinstance(defaults, dict)
    return defaults[name]


def drifted_keys(old: dict[str, Any], cfg: DictConfig) -> list[str]:
    """Flattened keys whose values differ between `old` and `cfg` (or exist on one side only), except those that
    may change on resume, and keys `old` lacks that `cfg` leaves at the schema's default: keys added to lmpt after
    the run started, whose defaults keep the behaviour the run had. The downstream section's task lists compare as
    one (`folded_tasks`): a run begun with the old keys resumes under `downstream.tasks`."""
    old = folded_tasks(old)
    new = folded_tasks(flatten(OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)))
    return sorted(
        k
        for k in old.keys() | new.keys()
        if k not in MAY_CHANGE and old.get(k) != new.get(k) and not (k not in old and new[k] == schema_default(cfg, k))
    )


def refuse_drift(checkpoint: Path, cfg: DictConfig) -> None:
    old = folded_tasks(flatten(load_part(checkpoint, "trainer")["config"]))
    keys = drifted_keys(old, cfg)
    if keys:
        new = folded_tasks(flatten(OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)))
        changes = ", ".join(f"{k} ({old.get(k)!r} -> {new.get(k)!r})" for k in keys[:6])
        more = f" and {len(keys) - 6} more" if len(keys) > 6 else ""
        raise LmptError(
            f"cannot resume {checkpoint} with a different configuration: {changes}{more}. "
            "Only run length, logging, checkpointing and device keys may change; start a new run for the rest"
        )
