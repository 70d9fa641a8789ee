"""Curve points during training: figures of the live model taken by a scorer built above this layer (the zero-shot
tasks of `downstream.score_every`, lmpt.downstream.curves) and handed down through run_training, so the training
layer imports nothing of downstream. Taking a point changes no training number: the model is scored in eval mode
without gradients, its train mode restored after, and the random streams (CPU and the device's) are forked, so the
dropout and masking draws after the point are those a run without points makes."""

from __future__ import annotations

from typing import Protocol, TypeGuard

import torch

from lmpt.model import LanguageModel
from lmpt.objectives.base import Objective


class CurveScorer(Protocol):
    @property
    def every(self) -> int:
        """Steps between curve points (a multiple of trainer.eval_every); the last step takes one too."""
        ...

    def __call__(self, model: LanguageModel, objective: Objective) -> dict[str, float]:
        """The figures of `model` (in eval mode) as metrics.jsonl keys."""
        ...


def curve_due(scorer: CurveScorer | None, step: int, last: bool) -> TypeGuard[CurveScorer]:
    """Whether `step` takes a curve point."""
    return scorer is not None and (step % scorer.every == 0 or last)


def take_curve_point(
    scorer: CurveScorer, model: LanguageModel, objective: Objective, device: torch.device
) -> dict[str, float]:
    """`scorer`'s figures of `model`, the training state as it was before: train mode, gradients, random streams."""
    was_training = model.training
    cuda = [device] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=cuda, device_type="cuda"), torch.no_grad():
        model.eval()
        try:
            return scorer(model, objective)
        finally:
            model.train(was_training)
