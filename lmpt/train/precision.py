"""Device and numeric precision: which device, which autocast dtype, and whether a GradScaler runs."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
from omegaconf import DictConfig

from lmpt.errors import LmptError


def pick_device(requested: str) -> torch.device:
    kind = requested.split(":")[0]
    if kind == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    if kind == "cuda" and not torch.cuda.is_available():
        raise LmptError("trainer.device=cuda but no CUDA GPU is visible: use trainer.device=cpu (or auto)")
    if kind == "mps" and not torch.backends.mps.is_available():
        raise LmptError("trainer.device=mps but MPS is not available: use trainer.device=cpu (or auto)")
    return torch.device(requested)


@dataclass(frozen=True)
class Precision:
    name: str  # fp32 | bf16 | fp16
    device: torch.device

    @property
    def dtype(self) -> torch.dtype | None:
        return {"bf16": torch.bfloat16, "fp16": torch.float16}.get(self.name)

    def autocast(self) -> contextlib.AbstractContextManager:
        if self.dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.dtype)

    def grad_scaler(self) -> torch.amp.GradScaler:
        """fp16 always scales; bf16 and fp32 never do (a disabled scaler is a no-op)."""
        return torch.amp.GradScaler(self.device.type, enabled=self.name == "fp16")


def pick_precision(trainer: DictConfig, device: torch.device) -> Precision:
    """`trainer.precision` wins; else `trainer.amp` means bf16 where supported, fp16 on older CUDA GPUs."""
    name = trainer.precision
    if name is None:
        if not trainer.amp:
            name = "fp32"
        elif device.type == "cuda" and not torch.cuda.is_bf16_supported():
            name = "fp16"
        else:
            name = "bf16"
    return Precision(name, device)
