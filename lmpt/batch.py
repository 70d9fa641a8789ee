"""The two records that cross stage boundaries: what the sampler hands an objective, and what an
objective hands the model."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from lmpt.data.corpus import TokenCorpus

IGNORE = -100
"""Label value of a position that carries no loss."""


@dataclass
class Windows:
    """B windows of consecutive corpus tokens. Documents in the stream end with eos, so a window may
    span several documents. `corpus` gives random access for objectives that look beyond the window
    (nsp draws its random second segment from another document)."""

    tokens: torch.Tensor  # [B, W] int64
    starts: torch.Tensor  # [B] int64: corpus offset of each window's first token
    corpus: TokenCorpus


@dataclass
class Batch:
    """A model-ready batch. Every tensor is batch-first; padding uses the pad id and never carries loss.

    Decoder: `input_ids` [B,S], `labels` [B,S] already shifted (labels[:, t] is the token that must
    follow position t); the model never shifts. Encoder: `labels` [B,S] hold the original token at
    loss-bearing positions. Encoder-decoder: `input_ids` feed the encoder, `decoder_input_ids` [B,T]
    feed the decoder and `labels` [B,T] are its targets."""

    input_ids: torch.Tensor
    labels: torch.Tensor
    attention: str = "causal"
    """Self-attention over `input_ids`: "causal", "bidirectional" or "prefix"."""
    prefix_len: torch.Tensor | None = None
    """[B] for "prefix" attention: positions < prefix_len see the whole prefix."""
    decoder_input_ids: torch.Tensor | None = None
    segment_ids: torch.Tensor | None = None
    """[B,S] segment of each input position (nsp: 0 through the first [SEP], 1 after)."""
    document_ids: torch.Tensor | None = None
    """[B,S] when set, attention stays within positions of equal id (clm document_attention)."""
    sequence_labels: torch.Tensor | None = None
    """[B] class of each example for the sequence head (nsp/sop)."""
    example_kinds: torch.Tensor | None = None
    """[B] index of the denoiser that made each example (ul2-mixture), for per-denoiser loss."""

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Batch:
        moved = {
            f.name: v.to(device, non_blocking=non_blocking)
            for f in fields(self)
            if isinstance(v := getattr(self, f.name), torch.Tensor)
        }
        return replace(self, **moved)

    def pin_memory(self) -> Batch:
        """Called by DataLoader(pin_memory=True) for custom batch types."""
        pinned = {f.name: v.pin_memory() for f in fields(self) if isinstance(v := getattr(self, f.name), torch.Tensor)}
        return replace(self, **pinned)

    @property
    def loss_tokens(self) -> int:
        return int((self.labels != IGNORE).sum())
