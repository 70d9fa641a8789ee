"""`optimizer=muon`: PyTorch's torch.optim.Muon on the 2-D matrices inside the blocks (attention and MLP
projections) and AdamW on every other parameter (embeddings and the tied head, norms, biases, the t5 lm_head and the
nsp sequence head), presented to the loop, the schedule, the GradScaler and the checkpoint as one optimizer."""

from __future__ import annotations

from typing import Any

import torch
from omegaconf import DictConfig
from torch import nn

from lmpt.train.param_groups import muon_parameter_names, parameter_groups


class MuonWithAdamW(torch.optim.Optimizer):
    """Two optimizers stepped as one. `param_groups` lists both optimizers' own group dicts (Muon's first), so a
    scheduler setting each group's lr, a GradScaler unscaling their gradients and clip-by-norm all reach both;
    the state dict holds each optimizer's state dict under its name."""

    def __init__(self, muon: torch.optim.Muon, adamw: torch.optim.AdamW) -> None:
        self.parts: dict[str, torch.optim.Optimizer] = {"muon": muon, "adamw": adamw}
        super().__init__([p for part in self.parts.values() for g in part.param_groups for p in g["params"]], {})
        self.param_groups = [group for part in self.parts.values() for group in part.param_groups]

    @torch.no_grad()
    def step(self, closure: Any = None) -> None:
        if closure is not None:
            raise ValueError("MuonWithAdamW.step takes no closure")
        for part in self.parts.values():
            part.step()

    def zero_grad(self, set_to_none: bool = True) -> None:
        for part in self.parts.values():
            part.zero_grad(set_to_none=set_to_none)

    def state_dict(self) -> dict[str, Any]:
        return {name: part.state_dict() for name, part in self.parts.items()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        for name, part in self.parts.items():
            part.load_state_dict(state_dict[name])
        self.param_groups = [group for part in self.parts.values() for group in part.param_groups]


def build_muon(cfg: DictConfig, model: nn.Module, device: torch.device) -> MuonWithAdamW:
    """Muon with `cfg.lr` etc. on `muon_parameter_names`, AdamW with `cfg.adamw_*` on the rest (fused where the
    device has it; no decay on norms, biases or embeddings)."""
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
    adamw = torch.optim.AdamW(groups, lr=cfg.adamw_lr, betas=tuple(cfg.adamw_betas), eps=cfg.adamw_eps, fused=fused)
    return MuonWithAdamW(muon, adamw)
