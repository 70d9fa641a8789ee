"""What the model returns: per-token losses on loss-bearing positions only (the head never runs elsewhere)."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class ModelOutput:
    token_loss: torch.Tensor
    """[N] float32 cross-entropy (natural log) at each position whose label is not IGNORE, in row-major order."""
    token_correct: torch.Tensor
    """[N] bool: the argmax prediction equals the label."""
    token_rows: torch.Tensor
    """[N] int64: batch row of each loss-bearing position (per-example aggregation, e.g. per denoiser)."""
    sequence_logits: torch.Tensor | None = None
    """[B, n_sequence_classes] from the first position's final hidden state (nsp/sop head)."""
    mtp_token_loss: tuple[torch.Tensor, ...] = ()
    """Per depth k of multi-token prediction: [N_k] float32 cross-entropy at the positions of mtp_labels[:, k-1]
    that are not IGNORE (the main head's loss stays in token_loss)."""
    mtp_token_correct: tuple[torch.Tensor, ...] = ()
    """Per depth: [N_k] bool, the module's argmax equals its target."""
