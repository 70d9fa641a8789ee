"""Optimizer and learning-rate schedule, both from PyTorch (torch.optim, LambdaLR), and which parameters each
optimizer takes and which are decayed.

`optimizer=muon`: PyTorch's torch.optim.Muon on the 2-D matrices inside the blocks (attention and MLP projections)
and AdamW on every other parameter (embeddings and the tied head, norms, biases, the t5 lm_head and the nsp sequence
head), presented to the loop, the schedule, the GradScaler and the checkpoint as one optimizer.

torch.optim.Muon orthogonalises each update by Newton–Schulz in bf16. On a CPU without native bf16 (an AVX2-only
CPU: most laptops and many servers) every one of those matmuls takes PyTorch's emulated bf16 path: two thirds of the
default run's step, 20 times what the same iteration costs in float32. There the iteration runs in float32
(`newton_schulz_float32`): the same quintic, coefficients and steps, more precise, not slower anywhere."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Collection
from typing import Any, cast

import torch
from torch import Tensor, nn

from lmpt.config.schema import AdafactorConfig, AdamWConfig, MuonConfig, OptimizerConfig, SchedulerConfig
from lmpt.private_api import muon_newton_schulz
from lmpt.train.precision import emulates_bf16


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


def _no_decay(name: str, param: nn.Parameter) -> bool:
    """Norm gains, biases and embeddings are never decayed (all are 1-D or embedding tables)."""
    return param.ndim < 2 or "embed" in name


def parameter_groups(model: nn.Module, weight_decay: float, skip: Collection[str] = frozenset()) -> list[dict]:
    """A decayed and an undecayed group of the trainable parameters whose names are not in `skip`."""
    decay: list[nn.Parameter] = []
    keep: list[nn.Parameter] = []
    for name, param in model.named_parameters():
        if param.requires_grad and name not in skip:
            (keep if _no_decay(name, param) else decay).append(param)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": keep, "weight_decay": 0.0}]


def muon_parameter_names(model: nn.Module) -> list[str]:
    """Names of the parameters Muon takes: trainable 2-D weights of the blocks' Linear layers (never an embedding,
    the head, or anything outside a stack's blocks)."""
    return [
        name
        for name, param in model.named_parameters()
        if param.requires_grad and param.ndim == 2 and ".blocks." in f".{name}" and not name.endswith("bias")
    ]


def newton_schulz_float32(
    grad: Tensor, ns_coefficients: tuple[float, float, float], ns_steps: int, eps: float
) -> Tensor:
    """torch.optim.Muon's orthogonalisation of `grad` (its quintic Newton–Schulz iteration, its coefficients and
    steps, the wide orientation), computed in float32 instead of bf16."""
    a, b, c = ns_coefficients
    tall = grad.size(0) > grad.size(1)
    x = grad.float().T if tall else grad.float()
    x = x / x.norm().clamp(min=eps)  # spectral norm at most 1
    for _ in range(ns_steps):
        gram = x @ x.T
        x = torch.addmm(x, torch.addmm(gram, gram, gram, beta=b, alpha=c), x, beta=a)
    return x.T if tall else x


def newton_schulz_dtype(device: torch.device, flags: frozenset[str] | None = None) -> torch.dtype:
    """bf16 (PyTorch's choice) where the device computes it natively, float32 where it would emulate it.
    `flags`: the CPU's feature flags (default: read from /proc/cpuinfo)."""
    return torch.float32 if emulates_bf16(device, flags) else torch.bfloat16


class MuonWithAdamW(torch.optim.Optimizer):
    """Two optimizers stepped as one. `param_groups` lists both optimizers' own group dicts (Muon's first), so a
    scheduler setting each group's lr, a GradScaler unscaling their gradients and clip-by-norm all reach both;
    the state dict holds each optimizer's state dict under its name."""

    def __init__(
        self, muon: torch.optim.Muon, adamw: torch.optim.AdamW, newton_schulz: torch.dtype = torch.bfloat16
    ) -> None:
        self.parts: dict[str, torch.optim.Optimizer] = {"muon": muon, "adamw": adamw}
        self.newton_schulz = newton_schulz
        """The dtype Muon orthogonalises its updates in: bf16 (PyTorch's) or float32 (`newton_schulz_dtype`)."""
        super().__init__([p for part in self.parts.values() for g in part.param_groups for p in g["params"]], {})
        self.param_groups = [group for part in self.parts.values() for group in part.param_groups]

    @torch.no_grad()
    def step(self, closure: None = None) -> None:  # type: ignore[override]  # takes no closure, as it says
        if closure is not None:
            raise ValueError("MuonWithAdamW.step takes no closure")
        in_float32 = (
            muon_newton_schulz(newton_schulz_float32)
            if self.newton_schulz == torch.float32
            else contextlib.nullcontext()
        )
        with in_float32:
            self.parts["muon"].step()
        self.parts["adamw"].step()

    def zero_grad(self, set_to_none: bool = True) -> None:
        for part in self.parts.values():
            part.zero_grad(set_to_none=set_to_none)

    def state_dict(self) -> dict[str, Any]:
        return {name: part.state_dict() for name, part in self.parts.items()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        for name, part in self.parts.items():
            part.load_state_dict(state_dict[name])
        self.param_groups = [group for part in self.parts.values() for group in part.param_groups]


def build_muon(cfg: MuonConfig, model: nn.Module, device: torch.device) -> MuonWithAdamW:
    """Muon with `cfg.lr` etc. on `muon_parameter_names`, AdamW with `cfg.adamw_*` on the rest (fused where the
    device has it; no decay on norms, biases or embeddings); Muon's Newton–Schulz in `newton_schulz_dtype`."""
    names = muon_parameter_names(model)
    by_name = dict(model.named_parameters())
    muon = torch.optim.Muon(
        [by_name[n] for n in names],
        lr=cfg.lr,
        weight_decay=cfg.weight_decay,
        momentum=cfg.momentum,
        nesterov=cfg.nesterov,
        ns_steps=cfg.ns_steps,
        adjust_lr_fn=None if cfg.adjust_lr_fn is None else str(cfg.adjust_lr_fn),  # plain text in the checkpoint
    )
    groups = [g for g in parameter_groups(model, cfg.adamw_weight_decay, skip=set(names)) if g["params"]]
    fused = device.type in ("cuda", "cpu", "mps")
    beta1, beta2 = cfg.adamw_betas
    adamw = torch.optim.AdamW(groups, lr=cfg.adamw_lr, betas=(beta1, beta2), eps=cfg.adamw_eps, fused=fused)
    return MuonWithAdamW(muon, adamw, newton_schulz_dtype(device))
