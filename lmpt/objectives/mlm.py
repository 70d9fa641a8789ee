"""mlm: BERT's masked language modelling. `mask_tokens` is the selection and replacement nsp reuses."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch

from lmpt.batch import Batch
from lmpt.data.sampler import Windows
from lmpt.errors import LmptError
from lmpt.objectives.base import Objective
from lmpt.objectives.checks import require_fraction, require_open_unit
from lmpt.objectives.masking import mask_tokens
from lmpt.objectives.measure import FixedRateMaskedLoss, Measure
from lmpt.objectives.schema import ObjectiveConfig
from lmpt.tokenizer.base import Tokenizer

MASK_SCHEDULES = ("constant", "linear", "cosine")
"""Shapes of objective.mask_prob_schedule."""


def scheduled_rate(start: float, end: float, shape: str, progress: float) -> float:
    """The masking rate at `progress` (0 = first step, 1 = last) of a schedule from `start` to `end`: linear (Ankner
    et al. 2023, GPT-BERT) or cosine (half a cosine: slow at both ends); constant is `end` throughout."""
    if shape == "constant":
        return end
    weight = progress if shape == "linear" else (1.0 - math.cos(math.pi * progress)) / 2.0
    return start + (end - start) * weight


def check_schedule(cfg: MlmConfig) -> None:
    """objective.mask_prob_schedule and its start rate."""
    if cfg.mask_prob_schedule not in MASK_SCHEDULES:
        raise LmptError(
            f"objective.mask_prob_schedule={cfg.mask_prob_schedule} is unknown: use {', '.join(MASK_SCHEDULES)}"
        )
    require_open_unit(cfg.mask_prob_start, "objective.mask_prob_start")


def check_masking(cfg: BertMasking) -> None:
    """The masking settings shared by mlm and nsp."""
    require_open_unit(cfg.mask_prob, "objective.mask_prob")
    require_open_unit(cfg.eval_mask_prob, "objective.eval_mask_prob")
    mask_frac = require_fraction(cfg.mask_token_frac, "objective.mask_token_frac")
    random_frac = require_fraction(cfg.random_token_frac, "objective.random_token_frac")
    if mask_frac + random_frac > 1.0:
        raise LmptError(
            f"objective.mask_token_frac + objective.random_token_frac = {mask_frac + random_frac:g} must be <= 1"
        )


@dataclass
class BertMasking(ObjectiveConfig):
    """BERT's masking settings, shared by mlm and nsp."""

    mask_prob: float = 0.15
    """Probability that each eligible token is selected for prediction."""
    mask_token_frac: float = 0.8
    """Share of selected tokens replaced by [MASK]."""
    random_token_frac: float = 0.1
    """Share of selected tokens replaced by a random ordinary token (the rest stay unchanged)."""
    whole_word: bool = False
    """Select whole words: all pieces of a word or none."""
    eval_mask_prob: float = 0.15
    """Fixed yardstick: held-out windows are also scored with this share of tokens masked (all [MASK], the same
    seeded positions in every run), so runs trained at different rates are ranked on one task."""


@dataclass
class MlmConfig(BertMasking):
    name: str = "mlm"
    mask_prob_schedule: str = "constant"
    """How the rate moves over training: constant (mask_prob throughout), linear or cosine from mask_prob_start at
    step 0 to mask_prob at the last step (trainer.max_steps, or the steps a trainer.budget buys), a function of the
    step so resume stays exact; held-out batches mask at mask_prob."""
    mask_prob_start: float = 0.3
    """The rate at step 0 when mask_prob_schedule is linear or cosine (Ankner et al. 2023: 0.3 down to 0.15)."""


class MaskedLM(Objective):
    """Predict independently selected tokens from a bidirectional encoder (BERT)."""

    name: ClassVar[str] = "mlm"
    config_class: ClassVar[type] = MlmConfig
    cfg: MlmConfig
    natural_arch: ClassVar[str] = "encoder"
    supported_archs: ClassVar[tuple[str, ...]] = ("encoder",)
    measure_class: ClassVar[type[Measure]] = FixedRateMaskedLoss

    listing_order: ClassVar[int] = 1
    reference_order: ClassVar[int] = 1
    loss_family: ClassVar[str | None] = "masked"

    def __init__(self, cfg: MlmConfig, tokenizer: Tokenizer, seq_len: int, arch: str) -> None:
        super().__init__(cfg, tokenizer, seq_len, arch)
        check_masking(cfg)
        check_schedule(cfg)
        self.word_starts = tokenizer.word_starts() if cfg.whole_word else None

    @property
    def expected_loss_fraction(self) -> float:
        """The mean rate over the run (a linear or cosine schedule averages its two ends)."""
        if self.cfg.mask_prob_schedule == "constant":
            return float(self.cfg.mask_prob)
        return (float(self.cfg.mask_prob_start) + float(self.cfg.mask_prob)) / 2.0

    def rate_at(self, step: int) -> float:
        """The masking rate of optimizer step `step` (mask_prob when the schedule is constant)."""
        cfg = self.cfg
        if cfg.mask_prob_schedule == "constant":
            return float(cfg.mask_prob)
        return scheduled_rate(
            float(cfg.mask_prob_start), float(cfg.mask_prob), cfg.mask_prob_schedule, self.progress(step)
        )

    @property
    def window_length(self) -> int:
        return self.seq_len

    def mask(
        self,
        tokens: torch.Tensor,
        gen: torch.Generator,
        rate: float | None = None,
        eligible: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """`mask_tokens` with this objective's settings, at `rate` (default mask_prob), where `eligible`."""
        return mask_tokens(
            tokens,
            gen,
            special=self.special,
            vocab_size=self.vocab_size,
            mask_prob=float(self.cfg.mask_prob) if rate is None else rate,
            mask_token_frac=float(self.cfg.mask_token_frac),
            random_token_frac=float(self.cfg.random_token_frac),
            word_starts=self.word_starts,
            eligible=eligible,
        )

    def make_batch(self, windows: Windows, gen: torch.Generator) -> Batch:
        inputs, labels = self.mask(windows.tokens, gen)
        return Batch(input_ids=inputs, labels=labels, attention="bidirectional")

    def batch_at(self, windows: Windows, gen: torch.Generator, step: int) -> Batch:
        inputs, labels = self.mask(windows.tokens, gen, self.rate_at(step))
        return Batch(input_ids=inputs, labels=labels, attention="bidirectional")

    def preview_settings(self) -> list[str]:
        if self.cfg.mask_prob_schedule == "constant" or self.max_steps is None:
            return []
        return [
            f"the rate moves {self.cfg.mask_prob_start:g} -> {self.cfg.mask_prob:g} ({self.cfg.mask_prob_schedule})"
            f" over {self.max_steps} steps"
        ]
