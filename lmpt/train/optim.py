"""Optimizer and learning-rate schedule, both from PyTorch (torch.optim, LambdaLR)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import cast

import torch
from torch import nn

from lmpt.config.optimizer_schema import MuonConfig
from lmpt.config.schema import AdafactorConfig, AdamWConfig, OptimizerConfig, SchedulerConfig
from lmpt.train.muon import build_muon
from lmpt.train.param_groups import parameter_groups


def build_optimizer(cfg: OptimizerConfig, model: nn.Module, device: torch.device) -> torch.optim.Optimizer:
    """The optimizer `cfg.name` names, with the settings of its own schema (the section holds that class's fields)."""
    if cfg.name == "muon":
        return build_muon(cast(MuonConfig, cfg), model, device)
    groups = parameter_groups(model, cfg.weight_decay)
    if cfg.name == "adamw":
        adamw = cast(AdamWConfig, cfg)
        fused = adamw.fused if adamw.fused is not None else device.type in ("cuda", "cpu", "mps")
        beta1, beta2 = adamw.betas
        return torch.optim.AdamW(groups, lr=adamw.lr, betas=(beta1, beta2), eps=adamw.eps, fused=fused)
    if cfg.name == "adafactor":
        adafactor = cast(AdafactorConfig, cfg)
        return torch.optim.Adafactor(
            groups, lr=adafactor.lr, beta2_decay=adafactor.beta2_decay, eps=(None, adafactor.eps)
        )
    raise ValueError(f"unknown optimizer {cfg.name}")  # unreachable: the config group has no other option


def lr_multiplier(step: int, cfg: SchedulerConfig, max_steps: int, position: float | None = None) -> float:
    """Learning rate at `step` as a fraction of the peak: linear warm-up over steps, then the named decay.
    `position` (a budgeted run: the share of the budget spent times max_steps) replaces the step after warm-up."""
    warmup = cfg.warmup_steps
    if step < warmup:
        return (step + 1) / (warmup + 1)
    at = step if position is None else max(position, warmup)
    floor = cfg.min_lr_ratio
    progress = min(1.0, (at - warmup) / max(1, max_steps - warmup))
    if cfg.name == "cosine":
        return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))
    if cfg.name == "linear":
        return floor + (1 - floor) * (1 - progress)
    if cfg.name == "constant":
        return 1.0
    if cfg.name == "inverse_sqrt":
        return math.sqrt(max(1, warmup) / max(1, at))
    if cfg.name == "wsd":
        decay_start = max_steps - int(cfg.decay_fraction * max_steps)
        if at < decay_start:
            return 1.0
        return floor + (1 - floor) * (1 - (at - decay_start) / max(1, max_steps - decay_start))
    raise ValueError(f"unknown schedule {cfg.name}")


def build_scheduler(
    cfg: SchedulerConfig,
    optimizer: torch.optim.Optimizer,
    max_steps: int,
    position: Callable[[], float | None] = lambda: None,
) -> torch.optim.lr_scheduler.LambdaLR:
    """The schedule over `max_steps`; `position` tells a budgeted run's place in it (see lr_multiplier)."""
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: lr_multiplier(step, cfg, max_steps, position()))
