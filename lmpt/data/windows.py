"""The record the sampler hands an objective: windows of consecutive corpus tokens."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from lmpt.data.corpus import TokenCorpus


@dataclass
class Windows:
    """B windows of consecutive corpus tokens. Documents in the stream end with eos, so a window may
    span several documents. `corpus` gives random access for objectives that look beyond the window
    (nsp draws its random second segment from another document)."""

    tokens: torch.Tensor  # [B, W] int64
    starts: torch.Tensor  # [B] int64: corpus offset of each window's first token
    corpus: TokenCorpus
