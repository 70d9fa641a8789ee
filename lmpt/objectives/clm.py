"""clm: causal language modelling. Targets are the inputs shifted by one, here and only here."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

import torch

from lmpt.batch import IGNORE, Batch
from lmpt.data.sampler import Windows
from lmpt.errors import LmptError
from lmpt.objectives.base import Objective
from lmpt.objectives.measure import Measure, NextTokenLikelihood
from lmpt.objectives.schema import ObjectiveConfig
from lmpt.tokenizer.base import Tokenizer


def document_ids(input_ids: torch.Tensor, eos: int) -> torch.Tensor:
    """[B,S] index of the packed document at each position, counted from 0 per row. The eos that ends a
    document belongs to it; the next document starts right after."""
    ends = (input_ids == eos).long()
    return torch.cumsum(ends, dim=1) - ends


@dataclass
class ClmConfig(ObjectiveConfig):
    name: str = "clm"
    document_attention: bool = False
    """Keep attention within each packed document instead of across the eos between them."""
    input_mask_prob: float = 0.0
    """Share of the input tokens replaced by [MASK] in training, each target still the clean next token: regularised
    autoregression, the control of Ni et al. 2025's ablations (0: plain clm). Held-out text is read clean."""


class CausalLM(Objective):
    """Next-token prediction over packed documents (eos between them) with a causal decoder."""

    name: ClassVar[str] = "clm"
    config_class: ClassVar[type] = ClmConfig
    cfg: ClmConfig
    natural_arch: ClassVar[str] = "decoder"
    supported_archs: ClassVar[tuple[str, ...]] = ("decoder",)
    measure_class: ClassVar[type[Measure]] = NextTokenLikelihood

    listing_order: ClassVar[int] = 0
    reference_order: ClassVar[int] = 0
    loss_family: ClassVar[str | None] = "next-token"
    preview_targets_caption: ClassVar[str] = "next token at every position: "

    def preview_legend(self) -> list[tuple[str, str]]:
        return []

    @property
    def window_length(self) -> int:
        return self.seq_len + 1

    def describe_attention(self) -> str:
        text = super().describe_attention()
        if self.cfg.document_attention:
            text += " of its own document (never across the eos between documents)"
        return text

    def __init__(self, cfg: ClmConfig, tokenizer: Tokenizer, seq_len: int, arch: str) -> None:
        super().__init__(cfg, tokenizer, seq_len, arch)
        self.input_mask_prob = float(cfg.input_mask_prob)
        if not 0.0 <= self.input_mask_prob < 1.0:
            raise LmptError(
                f"objective.input_mask_prob={self.input_mask_prob:g} must be in [0, 1): the share of inputs replaced "
                "by [MASK] (0: plain clm)"
            )

    def make_batch(self, windows: Windows, gen: torch.Generator) -> Batch:
        batch = self.plain_batch(windows)
        if self.input_mask_prob > 0.0:  # at 0 no draw is taken: plain clm's batches, bit for bit
            inputs = batch.input_ids
            hidden = (torch.rand(inputs.shape, generator=gen) < self.input_mask_prob) & (inputs != self.special.pad)
            batch = replace(batch, input_ids=inputs.masked_fill(hidden, self.special.mask))
        return batch

    def plain_batch(self, windows: Windows) -> Batch:
        """The windows read left to right, nothing corrupted: the held-out text's batch."""
        tokens = windows.tokens
        input_ids = tokens[:, :-1].clone()
        labels = tokens[:, 1:].clone()
        labels[labels == self.special.pad] = IGNORE
        docs = document_ids(input_ids, self.special.eos) if self.cfg.document_attention else None
        return Batch(input_ids=input_ids, labels=labels, attention="causal", document_ids=docs)
