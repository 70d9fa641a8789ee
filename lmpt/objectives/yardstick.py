"""The fixed yardstick of masked objectives: held-out windows scored at one masking rate shared by every run.

A run's own validation loss is measured at its training `mask_prob`, so a 40% run and a 5% run report
losses on different tasks. The yardstick masks `eval_mask_prob` of the tokens, every selected one replaced
by [MASK], token by token (no whole-word grouping), with draws seeded by the validation batch index alone:
two runs that differ in mask_prob, replacement fractions, whole_word or trainer.seed score the same
positions of the same windows."""

from __future__ import annotations

from typing import Any

import torch
from omegaconf import OmegaConf

from lmpt.objectives.base import Objective
from lmpt.objectives.registry import build_objective
from lmpt.rng import generator

YARDSTICK_PREFIX = "val_fixed_"
"""metrics.jsonl keys of the yardstick: val_fixed_loss (masked-token nats), val_fixed_acc, val_fixed_ppl."""


def eval_mask_prob(objective_cfg: Any) -> float | None:
    """The yardstick's masking rate, or None for objectives without one (clm, span, prefix, ul2-mixture)."""
    rate = getattr(objective_cfg, "eval_mask_prob", None)  # a DictConfig's missing key is an AttributeError too
    return None if rate is None else float(rate)


def fixed_rate_objective(objective: Objective) -> Objective | None:
    """`objective` masking at its eval_mask_prob with every selected token replaced by [MASK]; None when it
    has no yardstick."""
    rate = eval_mask_prob(objective.cfg)
    if rate is None:
        return None
    fixed = OmegaConf.merge(
        objective.cfg,
        {"mask_prob": rate, "mask_token_frac": 1.0, "random_token_frac": 0.0, "whole_word": False},
    )
    return build_objective(fixed, objective.tokenizer, objective.seq_len, objective.arch)


def yardstick_generator(source: str, batch_index: int) -> torch.Generator:
    """The draws of validation batch `batch_index` of `source` ("" for a run with one source): the same in every
    run, whatever its seed or settings."""
    return generator("yardstick", *([source] if source else []), batch_index)
