"""Optimizer and learning-rate schedule, both from PyTorch (torch.optim, LambdaLR)."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from omegaconf import DictConfig
from torch import nn

from lmpt.train.muon import build_muon
from lmpt.train.param_groups import parameter_groups


def build_optimizer(cfg: DictConfig, model: nn.Module, device: torch.device) -> torch.optim.Optimizer:
    if cfg.name == "muon":
        return build_muon(cfg, model, device)
    groups = parameter_groups(model, cfg.weight_decay)
    if cfg.name == "adamw":
        fused = cfg.fused if cfg.fused is not None else device.type in ("cuda", "cpu", "mps")
        return torch.optim.AdamW(groups, lr=cfg.lr, betas=tuple(cfg.betas), eps=cfg.eps, fused=fused)
    if cfg.name == "adafactor":
        return torch.optim.Adafactor(groups, lr=cfg.lr, beta2_decay=cfg.beta2_decay, eps=(None, cfg.eps))
    raise ValueError(f"unknown optimizer {cfg.name}")  # unreachable: the config group has no other option


def lr_multiplier(step: int, cfg: DictConfig, max_steps: int, position: float | None = None) -> float:
    """Learning rate at `step` as a fraction of the peak: linear warm-up over steps, then the named decay.
    `position` (a budgeted run: the share of the budget spent times max_steps) replaces the step after warm-up."""
    warmup = cfg.warmup_steps
    if step < warmup:
        return (step + 1) / (warmup + 1)
    step = step if position is None else max(position, warmup)
    floor = cfg.min_lr_ratio
    progress = min(1.0, (step - warmup) / max(1, max_steps - warmup))
    if cfg.name == "cosine":
        return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))
    if cfg.name == "linear":
        return floor + (1 - floor) * (1 - progress)
    if cfg.name == "constant":
        return 1.0
    if cfg.name == "inverse_sqrt":
        return math.sqrt(max(1, warmup) / max(1, step))
    if cfg.name == "wsd":
        decay_start = max_steps - int(cfg.decay_fraction * max_steps)
        if step < decay_start:
            return 1.0
        return floor + (1 - floor) * (1 - (step - decay_start) / max(1, max_steps - decay_start))
    raise ValueError(f"unknown schedule {cfg.name}")


def build_scheduler(
    cfg: DictConfig,
    optimizer: torch.optim.Optimizer,
    max_steps: int,
    position: Callable[[], float | None] = lambda: None,
) -> torch.optim.lr_scheduler.LambdaLR:
    """The schedule over `max_steps`; `position` tells a budgeted run's place in it (see lr_multiplier)."""
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: lr_multiplier(step, cfg, max_steps, position()))
