"""BERT's token masking (Devlin et al. 2019): which positions are selected, and what each selected one becomes. The
masked objectives (mlm, nsp, electra, clm-then-mlm, gpt-bert) and the fixed-rate measure share it."""

from __future__ import annotations

import torch

from lmpt.batch import IGNORE
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
