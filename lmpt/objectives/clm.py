"""clm: causal language modelling. Targets are the inputs shifted by one, here and only here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from lmpt.batch import IGNORE, Batch
from lmpt.data.windows import Windows
from lmpt.objectives.base import Objective
from lmpt.objectives.measure import Measure, NextTokenLikelihood
from lmpt.objectives.schema import ObjectiveConfig


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


class CausalLM(Objective):
    """Next-token prediction over packed documents (eos between them) with a causal decoder."""

    name: ClassVar[str] = "clm"
    config_class: ClassVar[type] = ClmConfig
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

    def make_batch(self, windows: Windows, gen: torch.Generator) -> Batch:
        tokens = windows.tokens
        input_ids = tokens[:, :-1].clone()
        labels = tokens[:, 1:].clone()
        labels[labels == self.special.pad] = IGNORE
        docs = document_ids(input_ids, self.special.eos) if self.cfg.document_attention else None
        return Batch(input_ids=input_ids, labels=labels, attention="causal", document_ids=docs)
