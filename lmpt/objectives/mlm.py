"""mlm: BERT's masked language modelling. `mask_tokens` is the selection and replacement nsp reuses."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from lmpt.batch import IGNORE, Batch
from lmpt.data.windows import Windows
from lmpt.errors import LmptError
from lmpt.objectives.base import Objective
from lmpt.objectives.checks import require_fraction, require_open_unit
from lmpt.objectives.schema import ObjectiveConfig
from lmpt.tokenizer.special import SpecialTokens


def select_positions(
    tokens: torch.Tensor,
    gen: torch.Generator,
    prob: float,
    eligible: torch.Tensor,
    word_starts: torch.Tensor | None = None,
) -> torch.Tensor:
    """[B,S] bool: each eligible position (or, with `word_starts` [vocab], each whole word) independently
    with probability `prob`. A word is a word-start piece and the non-start pieces after it; an ineligible
    token always stands alone, and a row's first position starts a word (the window may cut one)."""
    draws = torch.rand(tokens.shape, generator=gen)
    if word_starts is None:
        return (draws < prob) & eligible
    starts = word_starts.to(tokens.device)[tokens] | ~eligible
    starts[:, 0] = True
    word_index = torch.cumsum(starts.long(), dim=1) - 1
    return (draws.gather(1, word_index) < prob) & eligible


def mask_tokens(
    tokens: torch.Tensor,
    gen: torch.Generator,
    *,
    special: SpecialTokens,
    vocab_size: int,
    mask_prob: float,
    mask_token_frac: float = 0.8,
    random_token_frac: float = 0.1,
    word_starts: torch.Tensor | None = None,
    eligible: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT corruption of [B,S] `tokens`: returns (inputs, labels). Only ordinary ids (and only where
    `eligible`, if given) can be selected; of the selected, `mask_token_frac` become [MASK],
    `random_token_frac` a random ordinary id, the rest stay. labels = original token where selected,
    IGNORE elsewhere; unselected inputs are untouched. Draws: selection, action, random ids, always all three."""
    ordinary = ~special.reserved_mask(vocab_size).to(tokens.device)[tokens]
    eligible = ordinary if eligible is None else ordinary & eligible
    selected = select_positions(tokens, gen, mask_prob, eligible, word_starts)
    action = torch.rand(tokens.shape, generator=gen)
    pool = special.ordinary_ids(vocab_size)
    random_ids = pool[torch.randint(len(pool), tokens.shape, generator=gen)]
    to_mask = selected & (action < mask_token_frac)
    to_random = selected & (action >= mask_token_frac) & (action < mask_token_frac + random_token_frac)
    inputs = torch.where(to_mask, torch.full_like(tokens, special.mask), tokens)
    inputs = torch.where(to_random, random_ids.to(tokens.device), inputs)
    labels = torch.where(selected, tokens, torch.full_like(tokens, IGNORE))
    return inputs, labels


def check_masking(cfg: Any) -> None:
    """The masking settings shared by mlm and nsp."""
    require_open_unit(cfg.mask_prob, "objective.mask_prob")
    require_open_unit(cfg.eval_mask_prob, "objective.eval_mask_prob")
    mask_frac = require_fraction(cfg.mask_token_frac, "objective.mask_token_frac")
    random_frac = require_fraction(cfg.random_token_frac, "objective.random_token_frac")
    if mask_frac + random_frac > 1.0:
        raise LmptError(
            f"objective.mask_token_frac + objective.random_token_frac = {mask_frac + random_frac:g} must be <= 1"
        )


@dataclass
class MlmConfig(ObjectiveConfig):
    name: str = "mlm"
    mask_prob: float = 0.15
    """Probability that each eligible token is selected for prediction."""
    mask_token_frac: float = 0.8
    """Share of selected tokens replaced by [MASK]."""
    random_token_frac: float = 0.1
    """Share of selected tokens replaced by a random ordinary token (the rest stay unchanged)."""
    whole_word: bool = False
    """Select whole words: all pieces of a word or none."""
    eval_mask_prob: float = 0.15
    """Fixed yardstick: held-out windows are also scored with this share of tokens masked (all [MASK], the same
    seeded positions in every run), so runs trained at different rates are ranked on one task."""


class MaskedLM(Objective):
    """Predict independently selected tokens from a bidirectional encoder (BERT)."""

    name: ClassVar[str] = "mlm"
    config_class: ClassVar[type] = MlmConfig
    natural_arch: ClassVar[str] = "encoder"
    supported_archs: ClassVar[tuple[str, ...]] = ("encoder",)

    listing_order: ClassVar[int] = 1
    reference_order: ClassVar[int] = 1
    loss_family: ClassVar[str | None] = "masked"

    def __init__(self, cfg: Any, tokenizer: Any, seq_len: int, arch: str) -> None:
        super().__init__(cfg, tokenizer, seq_len, arch)
        check_masking(cfg)
        self.word_starts = tokenizer.word_starts() if cfg.whole_word else None

    @property
    def expected_loss_fraction(self) -> float:
        return float(self.cfg.mask_prob)

    @property
    def window_length(self) -> int:
        return self.seq_len

    def describe_attention(self) -> str:
        return "bidirectional: every position sees every position"

    def mask(self, tokens: torch.Tensor, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """`mask_tokens` with this objective's settings."""
        return mask_tokens(
            tokens,
            gen,
            special=self.special,
            vocab_size=self.vocab_size,
            mask_prob=float(self.cfg.mask_prob),
            mask_token_frac=float(self.cfg.mask_token_frac),
            random_token_frac=float(self.cfg.random_token_frac),
            word_starts=self.word_starts,
        )

    def make_batch(self, windows: Windows, gen: torch.Generator) -> Batch:
        inputs, labels = self.mask(windows.tokens, gen)
        return Batch(input_ids=inputs, labels=labels, attention="bidirectional")
