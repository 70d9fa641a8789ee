"""Every key of a composed config belongs to its schema. Hydra lets `+key=value` and `++key=value` add keys
the schema does not have (its struct mode opens for them), so a typo such as `+trainer.max_stepz=10` would
train with the default; this check refuses such a key, wherever it came from (command line, yaml, saved run)."""

from __future__ import annotations

import dataclasses

from omegaconf import DictConfig, ListConfig, OmegaConf

from lmpt.errors import LmptError


def unknown_keys(node: DictConfig | ListConfig, prefix: str = "") -> list[str]:
    """Dotted keys under `node` that no schema dataclass declares (nodes without a schema are not checked)."""
    if isinstance(node, ListConfig):
        items = [(f"{prefix}[{i}]", node._get_node(i)) for i in range(len(node))]
        return [key for name, child in items for key in _unknown_below(child, name)]
    schema = OmegaConf.get_type(node)
    declared = {f.name for f in dataclasses.fields(schema)} if dataclasses.is_dataclass(schema) else None
    found: list[str] = []
    for key in node.keys():
        name = f"{prefix}{key!s}"
        if declared is not None and key not in declared:
            found.append(name)
        else:
            found.extend(_unknown_below(node._get_node(key), name))
    return found


def _unknown_below(child: object, name: str) -> list[str]:
    if isinstance(child, (DictConfig, ListConfig)) and not child._is_missing() and not child._is_none():
        return unknown_keys(child, f"{name}." if isinstance(child, DictConfig) else name)
    return []


def refuse_unknown_keys(cfg: DictConfig) -> None:
    """LmptError naming the first key outside the schema."""
    keys = unknown_keys(cfg)
    if keys:
        more = f" (and {', '.join(keys[1:])})" if len(keys) > 1 else ""
        raise LmptError(
            f"unknown config key '{keys[0]}'{more}: check its spelling (`lmpt --help` lists the groups and keys)"
        )
