"""A local Hugging Face model directory as `model.init_from` reads it: config.json checked for settings lmpt's
model could not reproduce (the rotary settings read as transformers reads them), the shards named by
model.safetensors.index.json kept inside the directory, and every safetensors header checked before training
starts. Whatever is wrong is one LmptError naming the file."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import torch

from lmpt.errors import LmptError
from lmpt.safe_files import load_weights, weights_metadata

CONFIG_JSON = "config.json"
SHARD_INDEX = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"
DEFAULT_ROPE_THETA = 10000.0
"""transformers' rope_theta when a config names none."""
SHAPE_KEYS = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")
"""Sizes every source must give as positive whole numbers."""


def read_json_object(path: Path) -> dict[str, Any]:
    """The JSON object in `path`; anything else (broken JSON, a list, unreadable bytes) is refused naming it."""
    try:
        value = json.loads(path.read_bytes())
    except (ValueError, UnicodeDecodeError) as exc:
        raise LmptError(f"{path} is not JSON ({str(exc).splitlines()[0]}): fix or re-create it") from None
    if not isinstance(value, dict):
        raise LmptError(f"{path} is not a JSON object but a {type(value).__name__}: fix or re-create it")
    return value


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _positive(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def check_sizes(path: Path, c: dict[str, Any]) -> None:
    """The sizes lmpt builds the model from: positive whole numbers that divide as attention needs."""
    where = path / CONFIG_JSON
    heads = c.get("num_attention_heads")
    kv_heads = c.get("num_key_value_heads", heads)
    for key in (*SHAPE_KEYS, "num_key_value_heads"):
        value = c.get(key, kv_heads if key == "num_key_value_heads" else None)
        if not _whole(value):
            raise LmptError(f"{where}: {key}={value!r} must be a positive whole number: fix or re-create it")
    assert isinstance(heads, int) and isinstance(kv_heads, int)  # whole numbers, as checked just above
    if c["hidden_size"] % heads or heads % kv_heads:
        raise LmptError(
            f"{where}: hidden_size={c['hidden_size']}, num_attention_heads={heads} and num_key_value_heads="
            f"{kv_heads} do not divide into whole heads: fix or re-create it"
        )
    if not _positive(c.get("rms_norm_eps", 1e-6)):
        raise LmptError(f"{where}: rms_norm_eps={c.get('rms_norm_eps')!r} must be a positive number")


def _rope_type(entry: dict[str, Any]) -> str:
    return str(entry.get("rope_type", entry.get("type", "default")))


def rope_theta(path: Path, c: dict[str, Any]) -> float:
    """The rotary base transformers would use (its `convert_rope_params_to_dict`: a legacy `rope_scaling` dict
    replaces `rope_parameters`; the theta inside it wins over the top-level `rope_theta`). Any scaling or
    partial rotation, under either key, is refused by name: lmpt's rotary embedding has neither."""
    where = path / CONFIG_JSON
    for key in ("rope_scaling", "rope_parameters"):
        entry = c.get(key)
        if entry is None:
            continue
        if not isinstance(entry, dict):
            raise LmptError(f"{where}: {key} is {entry!r}, not a mapping: fix or re-create it")
        if entry and all(isinstance(v, dict) or v is None for v in entry.values()):
            raise LmptError(f"{where}: {key} sets rotary positions per layer type, which lmpt's model does not have")
        kind = _rope_type(entry)
        if kind != "default":
            raise LmptError(
                f"{where}: {key} has rope_type {kind} (scaled rotary positions), which lmpt's model does not have, "
                "so it could not continue this model exactly: start from a model trained with default rotary positions"
            )
    chosen = c.get("rope_scaling") or c.get("rope_parameters") or {}
    partial = chosen.get("partial_rotary_factor", c.get("partial_rotary_factor", 1.0))
    if partial != 1:
        raise LmptError(f"{where}: partial_rotary_factor={partial} rotates part of each head; lmpt rotates all of it")
    theta = chosen.get("rope_theta", c.get("rope_theta", DEFAULT_ROPE_THETA))
    if not _positive(theta):
        raise LmptError(f"{where}: rope_theta={theta!r} must be a positive number: fix or re-create it")
    return float(theta)


def check_function(path: Path, c: dict[str, Any]) -> None:
    """Settings that keep the shapes but change the function: lmpt's model could not reproduce the logits."""
    problems = {
        f"hidden_act={c.get('hidden_act')}": c.get("hidden_act", "silu") != "silu",
        "attention biases": bool(c.get("attention_bias")),
        "MLP biases": bool(c.get("mlp_bias")),
        f"head_dim={c.get('head_dim')}": c.get("head_dim") not in (None, c["hidden_size"] // c["num_attention_heads"]),
        "an untied output head": c.get("tie_word_embeddings", True) is False,
    }
    for problem, present in problems.items():
        if present:
            raise LmptError(f"{path} uses {problem}, which lmpt's model does not have: it cannot start from it")


def shard_files(path: Path) -> list[str]:
    """The safetensors files of a Hugging Face directory (one, or the shards its index names), each inside
    `path` and with a readable header (checked now: a broken file is refused before anything is written)."""
    index = path / SHARD_INDEX
    if index.is_file():
        weight_map = read_json_object(index).get("weight_map")
        if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
            raise LmptError(f"{index} is not a shard index (its weight_map maps no tensor names to files)")
        shards = sorted(set(weight_map.values()))
    elif (path / SINGLE_FILE).is_file():
        index, shards = path / SINGLE_FILE, [SINGLE_FILE]
    else:
        raise LmptError(f"{path} holds no {SINGLE_FILE}: lmpt reads safetensors weights only (never pickles)")
    for shard in shards:
        file = (path / shard).resolve()
        if not file.is_relative_to(path.resolve()):
            raise LmptError(f"{index} names {shard}, outside {path}: a model's shards lie in its own directory")
        if not file.is_file():
            raise LmptError(f"{index} names {shard}, which {path} does not hold: the model is incomplete")
        weights_metadata(file)  # the header: a torn or forged file is refused here
    return shards


def shard_weights(path: Path, shards: list[str]) -> dict[str, torch.Tensor]:
    """Every tensor of the shards, by Hugging Face name."""
    weights: dict[str, torch.Tensor] = {}
    for shard in shards:
        weights.update(load_weights(path / shard))
    return weights
