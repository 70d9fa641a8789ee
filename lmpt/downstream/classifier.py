"""A classification head on a pooled representation of a pre-trained lmpt model (`SequenceClassifier`), one choice per
architecture (`pooling=`; auto = the first listed):

- encoder: `mean` (of the final hidden states over non-padding positions) or `first` (position 0, [CLS]);
- decoder: `last` (the last non-padding position, the closing eos: the only one that has seen the whole input);
- encoder-decoder: `encoder_mean` (mean of the encoder's final states) or `decoder_first` (the decoder's first
  step, bos, cross-attending to the encoder).

Why these defaults: an mlm encoder never trains its [CLS] position (only nsp does), so the mean of its states is the
stronger untuned feature (Reimers & Gurevych 2019 report mean pooling ahead of [CLS] for BERT); a causal decoder's
states summarise the whole text only at its end (GPT's classification recipe); Sentence-T5 (Ni et al. 2021) finds
T5's encoder mean ahead of its decoder's first step. The head is one linear layer behind dropout in both modes."""

from __future__ import annotations

import torch
from torch import nn

from lmpt.batch import Batch
from lmpt.errors import LmptError
from lmpt.model import LanguageModel
from lmpt.model.stacks import EncoderDecoder

POOLINGS = {"encoder": ("mean", "first"), "decoder": ("last",), "encoder-decoder": ("encoder_mean", "decoder_first")}
"""Poolings each architecture offers; the first is the default (pooling=auto)."""


def resolve_pooling(arch: str, pooling: str) -> str:
    """`pooling` checked against `arch` (auto = the architecture's default)."""
    if pooling == "auto":
        return POOLINGS[arch][0]
    if pooling not in POOLINGS[arch]:
        raise LmptError(f"pooling={pooling} does not fit a {arch}: use auto or one of {', '.join(POOLINGS[arch])}")
    return pooling


class SequenceClassifier(nn.Module):
    """A pre-trained LanguageModel, a pooling of its hidden states and a linear head over `n_classes`."""

    def __init__(self, model: LanguageModel, pooling: str, n_classes: int, dropout: float) -> None:
        super().__init__()
        self.model = model
        self.pooling = pooling
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(model.d_model, n_classes)

    def pooled(self, batch: Batch) -> torch.Tensor:
        """[B, d] representation of each example, read as the module docstring's table says."""
        keep = (batch.input_ids != self.model.pad_id).unsqueeze(-1)
        if self.pooling == "encoder_mean":
            assert isinstance(self.model.body, EncoderDecoder), "encoder_mean pools an encoder-decoder's encoder"
            states = self.model.body.encode(batch.input_ids, batch.segment_ids)
        else:
            states = self.model.hidden_states(batch)
        if self.pooling in ("first", "decoder_first"):
            return states[:, 0]
        if self.pooling == "last":
            last = keep.squeeze(-1).sum(dim=1) - 1
            return states[torch.arange(states.shape[0], device=states.device), last]
        return (states * keep).sum(dim=1) / keep.sum(dim=1).clamp(min=1)

    def forward(self, pooled: torch.Tensor) -> torch.Tensor:
        """Float32 class logits [B, n_classes] of pooled representations."""
        return self.head(self.dropout(pooled)).float()

    def compile_body(self) -> None:
        """torch.compile the model as training does (LanguageModel.compile_parts); encoder_mean runs only the
        encoder stack, so that stack is compiled as well."""
        self.model.compile_parts()
        if self.pooling == "encoder_mean":
            self.model.body.encoder.compile()  # type: ignore[union-attr]
