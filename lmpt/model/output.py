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
