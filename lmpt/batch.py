"""The record an objective hands the model (what the sampler hands an objective is lmpt.data.sampler.Windows)."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import torch

IGNORE = -100
"""Label value of a position that carries no loss."""


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
    mtp_labels: torch.Tensor | None = None
    """[B, D, S] multi-token prediction: mtp_labels[:, k-1, t] is the token k+1 ahead of position t, the target of
    module k (IGNORE past the window, on padding, and in another document than position t's)."""
    mask_rate: torch.Tensor | None = None
    """[B] float32 masking time t of each row (mdlm: each token was masked with probability t; the loss weighs it
    by 1/t)."""
    sample_seed: int | None = None
    """Seed of the draws the model itself makes from this batch (electra: the generator's samples), drawn from
    the objective's generator so that it too is a function of (seed, step, micro_step, rank)."""

    input_padded: bool | None = None
    """Whether `input_ids` hold padding, noted on the host (`note_padding`) so the model picks its attention masks
    without a device sync or a graph break; None = the model looks."""
    decoder_padded: bool | None = None
    """The same for `decoder_input_ids`."""

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Batch:
        moved = {
            f.name: v.to(device, non_blocking=non_blocking)
            for f in fields(self)
            if isinstance(v := getattr(self, f.name), torch.Tensor)
        }
        return replace(self, **moved)  # type: ignore[arg-type]  # mypy types **dict as every field at once

    def pin_memory(self) -> Batch:
        """Called by DataLoader(pin_memory=True) for custom batch types."""
        pinned = {f.name: v.pin_memory() for f in fields(self) if isinstance(v := getattr(self, f.name), torch.Tensor)}
        return replace(self, **pinned)  # type: ignore[arg-type]  # as in `to`

    @property
    def loss_tokens(self) -> int:
        return int((self.labels != IGNORE).sum())


def note_padding(batch: Batch, pad_id: int) -> Batch:
    """`batch` with `input_padded` and `decoder_padded` set from its tensors, where they are made (on the host)."""
    decoder = batch.decoder_input_ids
    return replace(
        batch,
        input_padded=bool((batch.input_ids == pad_id).any()),
        decoder_padded=None if decoder is None else bool((decoder == pad_id).any()),
    )
