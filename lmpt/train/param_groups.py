"""Which parameters each optimizer takes, and which are decayed: read by lmpt.train.optim (AdamW, Adafactor)
and lmpt.train.muon (Muon on the blocks' matrices, AdamW on the rest)."""

from __future__ import annotations

from collections.abc import Collection

from torch import nn


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
