"""clm-then-mlm: one model trains causally, then switches to masked language modelling at a set share of the run,
keeping its weights ("Should We Still Pretrain Encoders with MLM?", Gisserot-Boukhlef et al. 2025). The run ends
as an encoder: its held-out batches, its saved model, lmpt-eval and lmpt-export treat it as the mlm encoder it is."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import nn

from lmpt.batch import IGNORE, Batch
from lmpt.config.schema import ModelConfig
from lmpt.data.sampler import Windows
from lmpt.model.build import build_model
from lmpt.objectives.base import Objective
from lmpt.objectives.checks import require_fraction
from lmpt.objectives.masking import mask_tokens
from lmpt.objectives.measure import FixedRateMaskedLoss, Measure
from lmpt.objectives.mlm import BertMasking, check_masking
from lmpt.tokenizer.base import Tokenizer


def causal_batch(tokens: torch.Tensor, pad: int) -> Batch:
    """clm's batch of [B, S+1] windows: inputs and the next tokens, causal attention."""
    labels = tokens[:, 1:].clone()
    labels[labels == pad] = IGNORE
    return Batch(input_ids=tokens[:, :-1].clone(), labels=labels, attention="causal")


def switch_step(switch_at: float, max_steps: int) -> int:
    """The first mlm step: steps 0 .. switch_step - 1 train causally."""
    return round(switch_at * max_steps)


@dataclass
class ClmThenMlmConfig(BertMasking):
    name: str = "clm-then-mlm"
    switch_at: float = 0.5
    """Share of the run trained with clm before it switches to mlm, in optimizer steps (equal shares of tokens): of
    trainer.max_steps, or of the steps a trainer.budget buys (0: mlm only, 1: clm only)."""


class ClmThenMlm(Objective):
    """clm batches (causal attention, shifted labels) until `switch_step`, then mlm batches (bidirectional attention,
    labels at the masked positions), one head throughout. Trained as a decoder stack whose attention each batch sets;
    an Encoder has the same weights under the same names, so the saved model is read back as the encoder it ends as."""

    name: ClassVar[str] = "clm-then-mlm"
    config_class: ClassVar[type] = ClmThenMlmConfig
    cfg: ClmThenMlmConfig
    natural_arch: ClassVar[str] = "encoder"
    supported_archs: ClassVar[tuple[str, ...]] = ("encoder",)
    measure_class: ClassVar[type[Measure]] = FixedRateMaskedLoss

    listing_order: ClassVar[int] = 9
    reference_order: ClassVar[int] = 9
    loss_family: ClassVar[str | None] = "masked"
    preview_targets_caption: ClassVar[str] = "next token at every position (clm phase): "

    def __init__(self, cfg: ClmThenMlmConfig, tokenizer: Tokenizer, seq_len: int, arch: str) -> None:
        super().__init__(cfg, tokenizer, seq_len, arch)
        check_masking(cfg)
        require_fraction(cfg.switch_at, "objective.switch_at")
        self.word_starts = tokenizer.word_starts() if cfg.whole_word else None

    def build_model(self, model_cfg: ModelConfig, model_vocab: int) -> nn.Module:
        """A decoder stack: it honours each batch's attention (an Encoder is always bidirectional)."""
        return build_model(model_cfg, "decoder", model_vocab, self.special.pad)

    @property
    def window_length(self) -> int:
        return self.seq_len + 1

    @property
    def expected_loss_fraction(self) -> float:
        switch_at = float(self.cfg.switch_at)
        return switch_at + (1.0 - switch_at) * float(self.cfg.mask_prob)

    @property
    def switch_step(self) -> int:
        if self.max_steps is None:
            raise RuntimeError("clm-then-mlm switches at a share of the run: call plan_run(max_steps) first")
        return switch_step(float(self.cfg.switch_at), self.max_steps)

    def describe_attention(self) -> str:
        return "causal, then bidirectional: causal in the clm phase, every position sees every position after it"

    def masked_batch(self, windows: Windows, gen: torch.Generator) -> Batch:
        """mlm's batch of the window's first seq_len tokens."""
        inputs, labels = mask_tokens(
            windows.tokens[:, : self.seq_len],
            gen,
            special=self.special,
            vocab_size=self.vocab_size,
            mask_prob=float(self.cfg.mask_prob),
            mask_token_frac=float(self.cfg.mask_token_frac),
            random_token_frac=float(self.cfg.random_token_frac),
            word_starts=self.word_starts,
        )
        return Batch(input_ids=inputs, labels=labels, attention="bidirectional")

    def make_batch(self, windows: Windows, gen: torch.Generator) -> Batch:
        """Held-out batches are mlm's: the task the run ends on (and the yardstick's)."""
        return self.masked_batch(windows, gen)

    def batch_at(self, windows: Windows, gen: torch.Generator, step: int) -> Batch:
        if step < self.switch_step:
            return causal_batch(windows.tokens, self.special.pad)
        return self.masked_batch(windows, gen)

    def preview_view(self, batch: Batch) -> tuple[Batch, bool]:
        return batch, batch.attention != "causal"

    def preview_settings(self) -> list[str]:
        if self.max_steps is None:
            return []
        k = self.switch_step
        return [f"clm for steps 0-{k - 1}, mlm from step {k} of {self.max_steps}"]
