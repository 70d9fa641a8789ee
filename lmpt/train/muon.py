"""`optimizer=muon`: PyTorch's torch.optim.Muon on the 2-D matrices inside the blocks (attention and MLP
projections) and AdamW on every other parameter (embeddings and the tied head, norms, biases, the t5 lm_head and the
nsp sequence head), presented to the loop, the schedule, the GradScaler and the checkpoint as one optimizer.

torch.optim.Muon orthogonalises each update by Newton–Schulz in bf16. On a CPU without native bf16 (an AVX2-only
CPU: most laptops and many servers) every one of those matmuls takes PyTorch's emulated bf16 path: two thirds of the
default run's step, 20 times what the same iteration costs in float32. There the iteration runs in float32
(`newton_schulz_float32`): the same quintic, coefficients and steps, more precise, not slower anywhere."""

from __future__ import annotations

import contextlib
from typing import Any

import torch
from torch import Tensor, nn

from lmpt.config.optimizer_schema import MuonConfig
from lmpt.private_api import muon_newton_schulz
from lmpt.train.param_groups import muon_parameter_names, parameter_groups
from lmpt.train.precision import emulates_bf16


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
        adjust_lr_fn=cfg.adjust_lr_fn,
    )
    groups = [g for g in parameter_groups(model, cfg.adamw_weight_decay, skip=set(names)) if g["params"]]
    fused = device.type in ("cuda", "cpu", "mps")
    beta1, beta2 = cfg.adamw_betas
    adamw = torch.optim.AdamW(groups, lr=cfg.adamw_lr, betas=(beta1, beta2), eps=cfg.adamw_eps, fused=fused)
    return MuonWithAdamW(muon, adamw, newton_schulz_dtype(device))
