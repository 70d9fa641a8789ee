"""Value checks the types cannot express: ranges, choices and sizes that must agree, and keys outside the schema.
Each failure is one LmptError naming the key, raised before any work starts. Objective settings are checked where the
objective is built (lmpt.objectives.registry).

Every key of a composed config belongs to its schema. Hydra lets `+key=value` and `++key=value` add keys the schema
does not have (its struct mode opens for them), so a typo such as `+trainer.max_stepz=10` would train with the
default; `refuse_unknown_keys` refuses such a key, wherever it came from (command line, yaml, saved run)."""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterator
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from lmpt.config.budget import SCALES, parse_budget
from lmpt.config.schema import (
    ARCHS,
)
from lmpt.errors import LmptError

_LABEL = re.compile(r"[A-Za-z0-9_.-]+")
_TOKEN_COUNT = re.compile(r"^\s*([+-]?\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)\s*([kKMGBT]?)\s*(?:tokens?)?\s*$")


def _require(ok: bool, key: str, value: object, rule: str) -> None:
    if not ok:
        raise LmptError(f"{key}={value!r} is invalid: it must be {rule}")


def _positive(section: DictConfig, prefix: str, *names: str, allow_zero: bool = False) -> None:
    for name in names:
        value = section[name]
        rule = ">= 0" if allow_zero else "> 0"
        _require(value >= 0 if allow_zero else value > 0, f"{prefix}.{name}", value, rule)


def _choice(value: object, key: str, choices: tuple) -> None:
    _require(value in choices, key, value, "one of " + ", ".join(str(c) for c in choices))


def _validate_sources(sources: Any) -> None:
    """Each source of a mixture: a unique label usable in metric names, a positive finite weight."""
    names: set[str] = set()
    for i, source in enumerate(sources):
        key = f"data.sources[{i}]"
        label = "a unique label of letters, digits, '_', '.' or '-'"
        name = source.name
        _require(bool(_LABEL.fullmatch(name or "")) and name not in names, f"{key}.name", name, label)
        names.add(name)
        weight = source.weight
        _require(math.isfinite(weight) and weight > 0, f"{key}.weight", weight, "a positive number (a share)")


def parse_max_tokens(text: str | None) -> int | None:
    """`data.max_tokens` as a whole number of tokens (50M, 2.5B, 1e6; k, M, G or B, T scale); None when unset."""
    if text is None:
        return None
    match = _TOKEN_COUNT.match(str(text))
    amount = float(match.group(1)) * SCALES[match.group(2)] if match else math.nan
    if not (math.isfinite(amount) and amount >= 1):
        raise LmptError(
            f"data.max_tokens={text} is invalid: it must be a positive number of tokens, e.g. data.max_tokens=50M "
            "(or null: the whole split)"
        )
    return int(amount)


def _validate_dataset(d: DictConfig) -> None:
    """data=hf: a dataset name, no files beside it, a positive token cap (and a cap only on a stream)."""
    if d.name is not None and not str(d.name).strip():  # data=hf sets "": the dataset must be named
        raise LmptError(
            "data=hf needs data.name: a Hugging Face Hub dataset (e.g. data.name=HuggingFaceFW/fineweb-edu) or a "
            "local parquet, JSONL or save_to_disk path"
        )
    parse_max_tokens(d.max_tokens)
    if d.name is None:
        if d.max_tokens is not None:
            raise LmptError(
                "data.max_tokens caps a dataset streamed with data=hf: set data.name too, or use data.unique_tokens "
                "to train on the first N tokens of data.paths"
            )
        return
    if d.paths or d.sources:
        raise LmptError(
            f"data.name={d.name} streams a dataset but data.paths or data.sources also name text: use one "
            "(data=hf sets data.paths=[])"
        )
    if d.val_paths:
        raise LmptError(
            f"data.val_paths cannot be given with data.name={d.name}: data.val_fraction of the stream is held out"
        )


def _numbers(node: Any, prefix: str = "") -> Iterator[tuple[str, float]]:
    """(dotted key, value) of every float in a config container."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _numbers(value, f"{prefix}{key}.")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _numbers(value, f"{prefix[:-1]}[{i}].")
    elif isinstance(node, float):
        yield prefix[:-1], node


def refuse_nonfinite(cfg: DictConfig) -> None:
    """No setting may be inf or nan (optimizer.lr=inf turns the weights to NaN at the first step)."""
    for key, value in _numbers(OmegaConf.to_container(cfg, resolve=True)):
        _require(math.isfinite(value), key, value, "a finite number")


def _validate_tokenizer(tok: DictConfig) -> None:
    _positive(tok, "tokenizer", "num_sentinels", "seed", allow_zero=True)
    _positive(tok, "tokenizer", "max_sentences", "threads")
    if tok.backend == "hf":
        if not tok.path:
            raise LmptError("tokenizer=hf needs tokenizer.path=DIR_OR_tokenizer.json (a pretrained fast tokenizer)")
        if tok.vocab_size is not None:
            raise LmptError(
                f"tokenizer.vocab_size={tok.vocab_size} cannot be set with a pretrained tokenizer "
                f"(tokenizer.path={tok.path} decides the vocabulary): drop tokenizer.vocab_size"
            )
        return
    if tok.path:
        raise LmptError(f"tokenizer.path is for tokenizer=hf, not {tok.backend}: use tokenizer=hf or drop it")
    reserved = 10 + tok.num_sentinels
    _require(
        tok.vocab_size is not None and tok.vocab_size > reserved + 256,
        "tokenizer.vocab_size",
        tok.vocab_size,
        f"> {reserved + 256} (reserved tokens + bytes)",
    )


def _validate_muon(o: DictConfig, strategy: str) -> None:
    if strategy == "fsdp":
        raise LmptError(
            "optimizer=muon does not run under trainer.strategy=fsdp (torch.optim.Muon orthogonalises whole matrices "
            "and FSDP2 shards them): use trainer.strategy=ddp, or optimizer=adamw with fsdp"
        )
    # torch.optim.Muon adds its update with alpha = lr x a shape factor, a float32 scalar: 1e39 stops the step with
    # an overflow error where AdamW's weights would turn inf (which the loop reports)
    rule = "<= 1e30 under optimizer=muon (its step scales the weights' update by it as a float32 number)"
    _require(o.lr <= 1e30, "optimizer.lr", o.lr, rule)
    _require(0 <= o.momentum < 1, "optimizer.momentum", o.momentum, "in [0, 1)")
    _positive(o, "optimizer", "ns_steps", "adamw_lr", "adamw_eps")
    _positive(o, "optimizer", "adamw_weight_decay", allow_zero=True)
    betas = list(o.adamw_betas)
    _require(len(betas) == 2 and all(0 <= b < 1 for b in betas), "optimizer.adamw_betas", betas, "two values in [0, 1)")


def _validate_finetune_lr(lr: str) -> None:
    """downstream.lr: fixed, search, or a positive finite number."""
    rule = "fixed, search or a positive finite number"
    if lr in ("fixed", "search"):
        return
    try:
        value = float(lr)
    except ValueError:
        value = math.nan
    _require(math.isfinite(value) and value > 0, "downstream.lr", lr, rule)


def _validate_weights(ds: DictConfig, trainer: DictConfig) -> None:
    """downstream.weights: best needs a run that keeps the weights of its best evaluation."""
    if ds.weights == "best" and (ds.tasks or ds.choice_tasks or ds.classification_tasks):
        rule = "last while trainer.eval_every=0 (no evaluation picks a best)"
        _require(trainer.eval_every > 0, "downstream.weights", ds.weights, rule)
        _require(trainer.keep_best, "downstream.weights", ds.weights, "last while trainer.keep_best=false")


def _validate_curves(ds: DictConfig, eval_every: int) -> None:
    """downstream.score_every: curve points are taken at evaluations, of the zero-shot tasks."""
    every, key = ds.score_every, "downstream.score_every"
    _require(every >= 0, key, every, ">= 0 (0 = scored only when training ends)")
    if every == 0:
        return
    _require(eval_every > 0, key, every, "0 while trainer.eval_every=0: curve points are taken at evaluations")
    _require(every % eval_every == 0, key, every, f"a multiple of trainer.eval_every={eval_every}")
    rule = "0 without a zero-shot task in downstream.tasks (only those are scored in training)"
    _require(bool(ds.tasks or ds.choice_tasks), key, every, rule)


def refuse_loose_booleans(cfg: DictConfig) -> None:
    """A yes-or-no key given on the command line as a number other than 0 or 1 is refused, naming the key (OmegaConf
    reads any number as a boolean: objective.low_discrepancy=2 was taken as true)."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf.nodes import BooleanNode

    if not HydraConfig.initialized():
        return
    parser = OverridesParser.create()
    for text in HydraConfig.get().overrides.task:
        override = parser.parse_override(text)
        if override.is_sweep_override() or override.is_delete() or not override.key_or_group.count("."):
            continue
        key = override.key_or_group
        parent, _, name = key.rpartition(".")
        node = OmegaConf.select(cfg, parent)
        child = node._get_node(name) if isinstance(node, DictConfig) and name in node else None
        value = override.value()
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if isinstance(child, BooleanNode) and number and value not in (0, 1):
            raise LmptError(f"{key}={override.get_value_element_as_str()} is not a yes or no: give {key}=true or false")


def validate_config(cfg: DictConfig) -> None:
    """Check every key belongs to the schema, then every group's values except the objective's; raise LmptError
    on the first bad key or value."""
    refuse_unknown_keys(cfg)
    refuse_nonfinite(cfg)
    refuse_loose_booleans(cfg)
    t, d, m, o, s, tok = cfg.trainer, cfg.data, cfg.model, cfg.optimizer, cfg.scheduler, cfg.tokenizer
    if d.get("name") is None and not d.get("sources") and not d.paths:
        raise LmptError(
            "data.paths is empty: give the text to train on, e.g. data.paths=[corpus/,more/*.jsonl] "
            "(data=text; data=mixture names its sources, data=hf a dataset)"
        )
    _positive(t, "trainer", "max_steps", "batch_size", "grad_accum", "log_every", "eval_batches", "keep_last")
    _positive(t, "trainer", "max_nonfinite_steps")
    _positive(t, "trainer", "eval_every", "ckpt_every", "ckpt_minutes", "grad_clip", "sample_tokens", allow_zero=True)
    parse_budget(t.budget)
    device = t.device.split(":")[0]
    _choice(device, "trainer.device", ("auto", "cpu", "cuda", "mps"))

    _positive(d, "data", "seq_len", "shard_docs")
    _require(d.seq_len >= 4, "data.seq_len", d.seq_len, ">= 4")
    _positive(d, "data", "num_workers", "tokenize_workers", allow_zero=True)
    if not d.val_paths:
        _require(0 < d.val_fraction < 1, "data.val_fraction", d.val_fraction, "in (0, 1) (or set data.val_paths)")
    _validate_sources(d.sources)
    _validate_dataset(d)
    if d.unique_tokens is not None:  # too many for the text is known once it is tokenised (lmpt.data.sampling)
        _require(d.unique_tokens > 0, "data.unique_tokens", d.unique_tokens, "> 0 (or null: all the training text)")

    _choice(m.arch, "model.arch", ARCHS)
    _positive(m, "model", "d_model", "n_layers", "n_heads", "ffn_dim", "max_seq_len", "norm_eps", "rope_theta")
    _require(
        m.n_decoder_layers is None or m.n_decoder_layers > 0,
        "model.n_decoder_layers",
        m.n_decoder_layers,
        "> 0",
    )
    _require(
        m.n_kv_heads is None or (m.n_kv_heads > 0 and m.n_heads % m.n_kv_heads == 0),
        "model.n_kv_heads",
        m.n_kv_heads,
        f"null or a positive divisor of model.n_heads={m.n_heads}",
    )
    _require(0 <= m.dropout < 1, "model.dropout", m.dropout, "in [0, 1)")

    _positive(o, "optimizer", "lr")
    _positive(o, "optimizer", "weight_decay", allow_zero=True)
    if "betas" in o:
        _require(
            len(o.betas) == 2 and all(0 <= b < 1 for b in o.betas),
            "optimizer.betas",
            list(o.betas),
            "two values in [0, 1)",
        )

    if o.name == "muon":
        _validate_muon(o, t.strategy)

    _positive(s, "scheduler", "warmup_steps", allow_zero=True)
    _require(0 <= s.min_lr_ratio <= 1, "scheduler.min_lr_ratio", s.min_lr_ratio, "in [0, 1]")
    _require(0 <= s.decay_fraction <= 1, "scheduler.decay_fraction", s.decay_fraction, "in [0, 1]")

    _positive(cfg.downstream, "downstream", "seeds", "epochs", "batch_size", "curve_items")
    cap = cfg.downstream.max_train_examples
    _require(cap is None or cap >= 1, "downstream.max_train_examples", cap, ">= 1 (or null: every example)")
    _validate_curves(cfg.downstream, t.eval_every)
    _validate_weights(cfg.downstream, t)
    _validate_finetune_lr(str(cfg.downstream.lr))

    _validate_tokenizer(tok)
    _require(0 < tok.character_coverage <= 1, "tokenizer.character_coverage", tok.character_coverage, "in (0, 1]")


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
