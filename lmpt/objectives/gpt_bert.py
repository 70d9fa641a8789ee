"""gpt-bert: one transformer trained on masked next-token prediction and causal language modelling, batches mixed
(Charpentier & Samuel, BabyLM 2024, "GPT or BERT: why not both?"). In a masked batch each masked token is predicted
at the position before it, so both kinds share clm's shifted output; masked batches attend both ways."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from lmpt.batch import IGNORE, Batch
from lmpt.data.sampler import Windows
from lmpt.model.output import ModelOutput
from lmpt.objectives.base import ENCODER_LEGEND, Stats
from lmpt.objectives.checks import require_fraction
from lmpt.objectives.clm_then_mlm import causal_batch
from lmpt.objectives.measure import CausalFixedRate, Measure
from lmpt.objectives.mlm import MaskedLM, MlmConfig
from lmpt.tokenizer.base import Tokenizer

KINDS = ("clm", "mntp")
"""Batch kinds, by the name of their loss in metrics.jsonl (clm_loss, mntp_loss)."""


@dataclass
class GptBertConfig(MlmConfig):
    name: str = "gpt-bert"
    mask_prob_schedule: str = "linear"
    """GPT-BERT moves its masking rate linearly from mask_prob_start (0.3) to mask_prob (0.15) over training."""
    causal_ratio: float = 0.0625
    """Share of batches trained causally (clm); the rest are masked next-token prediction. GPT-BERT's default is
    1 causal to 15 masked (1/16)."""


def masked_next_token(
    objective: MaskedLM, tokens: torch.Tensor, gen: torch.Generator, rate: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs, labels) of [B, S+1] windows: BERT's corruption of the tokens after the first, then labels shifted once
    as clm's: labels[:, t] is the original token at t+1 where t+1 was selected, IGNORE elsewhere."""
    eligible = torch.ones_like(tokens, dtype=torch.bool)
    eligible[:, 0] = False  # nothing comes before it to predict it
    corrupted, original = objective.mask(tokens, gen, rate, eligible)
    return corrupted[:, :-1], original[:, 1:]


class GptBert(MaskedLM):
    """Each training batch is causal with probability causal_ratio (drawn from the step's generator), else masked
    next-token prediction at the step's masking rate with bidirectional attention; one decoder, one head."""

    name: ClassVar[str] = "gpt-bert"
    config_class: ClassVar[type] = GptBertConfig
    cfg: GptBertConfig
    natural_arch: ClassVar[str] = "decoder"
    supported_archs: ClassVar[tuple[str, ...]] = ("decoder",)
    measure_class: ClassVar[type[Measure]] = CausalFixedRate

    listing_order: ClassVar[int] = 10
    reference_order: ClassVar[int] = 10
    loss_family: ClassVar[str | None] = None
    preview_targets_caption: ClassVar[str] = "next token at every position (causal batch): "

    def __init__(self, cfg: GptBertConfig, tokenizer: Tokenizer, seq_len: int, arch: str) -> None:
        super().__init__(cfg, tokenizer, seq_len, arch)
        require_fraction(cfg.causal_ratio, "objective.causal_ratio")

    @property
    def window_length(self) -> int:
        return self.seq_len + 1

    @property
    def expected_loss_fraction(self) -> float:
        ratio = float(self.cfg.causal_ratio)
        return ratio + (1.0 - ratio) * super().expected_loss_fraction

    def describe_attention(self) -> str:
        return "causal or bidirectional by batch: causal batches see earlier positions, masked ones every position"

    def masked_batch(self, windows: Windows, gen: torch.Generator, rate: float) -> Batch:
        inputs, labels = masked_next_token(self, windows.tokens, gen, rate)
        return Batch(input_ids=inputs, labels=labels, attention="bidirectional")

    def make_batch(self, windows: Windows, gen: torch.Generator) -> Batch:
        """Held-out batches are masked at mask_prob (GPT-BERT validates masked at 0.15)."""
        return self.masked_batch(windows, gen, float(self.cfg.mask_prob))

    def batch_at(self, windows: Windows, gen: torch.Generator, step: int) -> Batch:
        if torch.rand((), generator=gen).item() < float(self.cfg.causal_ratio):
            return causal_batch(windows.tokens, self.special.pad)
        return self.masked_batch(windows, gen, self.rate_at(step))

    def loss(self, out: ModelOutput, batch: Batch) -> tuple[torch.Tensor, Stats]:
        """The batch's loss, also under its kind's name (clm_loss or mntp_loss)."""
        loss, stats = super().loss(out, batch)
        stats[f"{KINDS[batch.attention != 'causal']}_loss"] = stats["loss"]
        return loss, stats

    def preview_view(self, batch: Batch) -> tuple[Batch, bool]:
        """A masked batch shown with each label moved back onto the masked token it restores (the last window
        token, predicted at the last position, drops out of view)."""
        if batch.attention == "causal":
            return batch, False
        labels = torch.full_like(batch.labels, IGNORE)
        labels[:, 1:] = batch.labels[:, :-1]
        return Batch(input_ids=batch.input_ids, labels=labels, attention=batch.attention), True

    def preview_legend(self) -> list[tuple[str, str]]:
        return list(ENCODER_LEGEND)

    def preview_settings(self) -> list[str]:
        settings = ["masked tokens are predicted at the position before them (shown here at their own)"]
        return settings + super().preview_settings()
