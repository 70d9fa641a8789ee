"""prefix: prefix language modelling. The prefix is seen whole; the suffix is predicted causally."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch

from lmpt.batch import Batch
from lmpt.data.sampler import Windows
from lmpt.errors import LmptError
from lmpt.objectives.base import Objective
from lmpt.objectives.checks import require_fraction
from lmpt.objectives.measure import CausalReading, Measure
from lmpt.objectives.schema import ObjectiveConfig
from lmpt.objectives.sequences import prefix_lm_batch
from lmpt.tokenizer.base import Tokenizer

PREFIX_ATTENTION = (
    "prefix: every prefix position sees the whole prefix; a suffix position sees the prefix and earlier suffix "
    "positions"
)


def split_range(length: int, split_min: float, split_max: float) -> tuple[int, int]:
    """Inclusive range of prefix lengths of a `length`-token input: [max(1, ceil(split_min*L)),
    min(L-1, floor(split_max*L))] (a hair of float slack so 0.3*10 counts as 3)."""
    low = max(1, math.ceil(split_min * length - 1e-9))
    high = min(length - 1, math.floor(split_max * length + 1e-9))
    return low, high


def uniform_splits(low: int, high: int, batch_size: int, gen: torch.Generator) -> torch.Tensor:
    """[B] prefix lengths uniform on the integers low..high."""
    return torch.randint(low, high + 1, (batch_size,), generator=gen)


@dataclass
class PrefixConfig(ObjectiveConfig):
    name: str = "prefix"
    split_min: float = 0.0
    """Smallest prefix length as a fraction of the window (the split is at least 1 token in)."""
    split_max: float = 1.0
    """Largest prefix length as a fraction of the window (the split leaves at least 1 target token)."""


class PrefixLM(Objective):
    """Decoder with prefix attention: loss on the suffix only, split point uniform per example."""

    name: ClassVar[str] = "prefix"
    config_class: ClassVar[type] = PrefixConfig
    cfg: PrefixConfig
    natural_arch: ClassVar[str] = "decoder"
    supported_archs: ClassVar[tuple[str, ...]] = ("decoder",)
    measure_class: ClassVar[type[Measure]] = CausalReading

    listing_order: ClassVar[int] = 4
    reference_order: ClassVar[int] = 5
    reads_prefix: ClassVar[bool] = True

    def preview_settings(self) -> list[str]:
        return [f"prefix length {self.low}..{self.high} of {self.seq_len}"]

    def __init__(self, cfg: PrefixConfig, tokenizer: Tokenizer, seq_len: int, arch: str) -> None:
        super().__init__(cfg, tokenizer, seq_len, arch)
        split_min = require_fraction(cfg.split_min, "objective.split_min")
        split_max = require_fraction(cfg.split_max, "objective.split_max")
        if not split_min < split_max:
            raise LmptError(f"objective.split_min={split_min:g} must be below objective.split_max={split_max:g}")
        self.low, self.high = split_range(seq_len, split_min, split_max)
        if self.low > self.high:
            raise LmptError(
                f"objective.split_min={split_min:g} and objective.split_max={split_max:g} leave no split point "
                f"in data.seq_len={seq_len}: widen the range"
            )

    @property
    def expected_loss_fraction(self) -> float:
        return 1.0 - (self.low + self.high) / 2 / self.seq_len

    @property
    def window_length(self) -> int:
        return self.seq_len + 1

    def describe_attention(self) -> str:
        return PREFIX_ATTENTION

    def make_batch(self, windows: Windows, gen: torch.Generator) -> Batch:
        tokens = windows.tokens
        splits = uniform_splits(self.low, self.high, tokens.shape[0], gen).tolist()
        prefixes = [row[:k] for row, k in zip(tokens, splits, strict=True)]
        targets = [row[k:] for row, k in zip(tokens, splits, strict=True)]
        return prefix_lm_batch(prefixes, targets, self.seq_len, self.special)
