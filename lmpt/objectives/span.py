"""span: T5 span corruption. Noise spans become sentinels in the input; the target spells them out."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import torch

from lmpt.batch import Batch
from lmpt.data.sampler import Windows
from lmpt.errors import LmptError
from lmpt.objectives.base import Objective, ScoringFrame
from lmpt.objectives.checks import require_at_least, require_open_unit
from lmpt.objectives.measure import CorruptionLoss, Measure
from lmpt.objectives.schema import ObjectiveConfig
from lmpt.objectives.sequences import encoder_decoder_batch, prefix_lm_batch
from lmpt.tokenizer.base import Tokenizer
from lmpt.tokenizer.special import SpecialTokens

_ABSENT = -1  # marks an empty slot while interleaving sentinels and tokens


def span_lengths(raw_length: int, r: float, mu: float) -> tuple[int, int, int, int]:
    """(n_noise, n_spans, input_len, target_len) of a raw window of `raw_length` tokens: n = clip(round(L*r),
    1, L-1), s = max(1, round(n/mu)), input L - n + s + 1 and target n + s + 1 (eos included in both)."""
    n = min(max(round(raw_length * r), 1), raw_length - 1)
    s = max(1, round(n / mu))
    return n, s, raw_length - n + s + 1, n + s + 1


def largest_raw_length(fits: Callable[[int], bool]) -> int:
    """Largest raw length L >= 2 with `fits(L)`, for a condition that holds up to some L and not beyond;
    0 if not even L = 2 fits."""
    if not fits(2):
        return 0
    low, high = 2, 4
    while fits(high):
        low, high = high, high * 2
    while high - low > 1:  # fits(low) and not fits(high)
        mid = (low + high) // 2
        low, high = (mid, high) if fits(mid) else (low, mid)
    return low


def raw_length_for(input_length: int, r: float, mu: float) -> int:
    """T5's random_spans_helper: the largest raw window whose corrupted input (eos included) fits
    `input_length` tokens (512 -> 568 at r=0.15, mu=3); at r = 0.5 exactly, one token less when the targets
    would be longer than the inputs, so they never exceed the input length (512 -> 766, targets 512, at mu=3)."""
    raw = largest_raw_length(lambda raw: span_lengths(raw, r, mu)[2] <= input_length)
    if r == 0.5 and raw > 2:
        _, _, inputs, targets = span_lengths(raw, r, mu)
        if targets > inputs:
            raw -= 1
    return raw


def decoder_raw_length_for(seq_len: int, r: float, mu: float, extra: int = 0) -> int:
    """The largest raw window whose decoder-only form (`extra` leading tokens, corrupted input, then the
    targets, fed shifted by one) fits `seq_len`."""

    def fits(raw: int) -> bool:
        _, _, input_len, target_len = span_lengths(raw, r, mu)
        return extra + input_len + target_len - 1 <= seq_len

    return largest_raw_length(fits)


def random_segmentation(num_items: int, num_segments: int, gen: torch.Generator) -> torch.Tensor:
    """[num_segments] positive int64 lengths summing to `num_items`, uniform over all such compositions."""
    if not 1 <= num_segments <= num_items:
        raise ValueError(f"cannot cut {num_items} items into {num_segments} non-empty segments")
    cuts = torch.randperm(num_items - 1, generator=gen)[: num_segments - 1] + 1
    bounds = torch.cat([torch.zeros(1, dtype=torch.long), torch.sort(cuts).values, torch.tensor([num_items])])
    return torch.diff(bounds)


def random_spans_noise_mask(length: int, noise_density: float, mean_span_length: float, gen: torch.Generator):
    """[length] bool, True at noise: exactly n noise tokens in exactly s spans (`span_lengths`), the noise
    and non-noise lengths random segmentations into s parts, interleaved starting with non-noise."""
    n, s, _, _ = span_lengths(length, noise_density, mean_span_length)
    noise = random_segmentation(n, s, gen)
    nonnoise = random_segmentation(length - n, s, gen)
    lengths = torch.stack([nonnoise, noise], dim=1).reshape(-1)
    span_starts = torch.zeros(length, dtype=torch.long)
    span_starts[torch.cumsum(lengths, dim=0)[:-1]] = 1
    return torch.cumsum(span_starts, dim=0) % 2 == 1


def sentinel_ids(noise: torch.Tensor, special: SpecialTokens) -> torch.Tensor:
    """[..., L] the sentinel of each noise span at its first token (in order per row), _ABSENT elsewhere."""
    previous = torch.zeros_like(noise)
    previous[..., 1:] = noise[..., :-1]
    starts = noise & ~previous
    index = torch.cumsum(starts.long(), dim=-1) - 1
    table = special.sentinel_table().to(index.device)
    sentinels = table[index.clamp(0, max(len(table) - 1, 0))] if len(table) else torch.full_like(index, _ABSENT)
    return torch.where(starts, sentinels, torch.full_like(index, _ABSENT))


def corrupt_spans(
    tokens: torch.Tensor, noise: torch.Tensor, special: SpecialTokens
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Per row of [B,L] `tokens` with [B,L] `noise`: (input, target), each ending with eos. Input: tokens
    with each noise span replaced by its sentinel; target: sentinel_0 span_0 sentinel_1 span_1 ... eos."""
    sentinels = sentinel_ids(noise, special)
    absent = torch.full_like(tokens, _ABSENT)
    kept = torch.stack([sentinels, torch.where(noise, absent, tokens)], dim=-1).flatten(-2)
    dropped = torch.stack([sentinels, torch.where(noise, tokens, absent)], dim=-1).flatten(-2)
    return _rows_with_eos(kept, special.eos), _rows_with_eos(dropped, special.eos)


def _rows_with_eos(slots: torch.Tensor, eos: int) -> list[torch.Tensor]:
    """The present slots of each row of [B, N] `slots`, each followed by eos."""
    slots = torch.cat([slots, torch.full_like(slots[:, :1], eos)], dim=1)
    present = slots != _ABSENT
    return list(torch.split(slots[present], present.sum(dim=1).tolist()))


def check_span_settings(
    r: float, mu: float, raw_length: int, special: SpecialTokens, seq_len: int, what: str = "span corruption"
) -> None:
    """Refuse a setting whose windows cannot be segmented or need more sentinels than the tokenizer has."""
    if raw_length < 2:
        raise LmptError(f"{what} cannot fit a corrupted window in data.seq_len={seq_len}: raise data.seq_len")
    n, s, _, _ = span_lengths(raw_length, r, mu)
    if s > raw_length - n:
        raise LmptError(
            f"{what} with noise_density={r:g} and mean_span_length={mu:g} makes {s} spans but has only "
            f"{raw_length - n} clean tokens to separate them: lower noise_density or raise mean_span_length"
        )
    if s > special.num_sentinels:
        own = " (a tokenizer file with its own <extra_id_N> pieces keeps their count)" if special.sentinel_ids else ""
        raise LmptError(
            f"{what} at data.seq_len={seq_len} makes {s} spans but the tokenizer has {special.num_sentinels} "
            f"sentinels: raise tokenizer.num_sentinels to at least {s}{own} or lower data.seq_len or noise_density "
            "(or raise mean_span_length)"
        )


@dataclass
class SpanConfig(ObjectiveConfig):
    name: str = "span"
    noise_density: float = 0.15
    """Fraction of raw tokens corrupted into spans (r)."""
    mean_span_length: float = 3.0
    """Mean length of a corrupted span (mu)."""


class SpanCorruption(Objective):
    """T5 span corruption: encoder-decoder, or decoder-only with the corrupted input as a prefix."""

    name: ClassVar[str] = "span"
    config_class: ClassVar[type] = SpanConfig
    cfg: SpanConfig
    natural_arch: ClassVar[str] = "encoder-decoder"
    supported_archs: ClassVar[tuple[str, ...]] = ("encoder-decoder", "decoder")
    measure_class: ClassVar[type[Measure]] = CorruptionLoss

    listing_order: ClassVar[int] = 3
    reference_order: ClassVar[int] = 4
    reads_prefix: ClassVar[bool] = True

    @classmethod
    def scoring_frame(cls, special: SpecialTokens, context: list[int], target: list[int]) -> ScoringFrame:
        """T5's span filling: context + <extra_id_0> + eos, then <extra_id_0> target (the sentinel unscored)."""
        sentinel = special.sentinel(0)
        return ScoringFrame([], context, [sentinel, special.eos], [sentinel, *target], 1)

    def preview_legend(self) -> list[tuple[str, str]]:
        return [*super().preview_legend(), ("sentinel", "sentinel")]

    def preview_settings(self) -> list[str]:
        return [f"{self.raw_length} raw tokens -> {self.n_noise} noise in {self.n_spans} spans"]

    def __init__(self, cfg: SpanConfig, tokenizer: Tokenizer, seq_len: int, arch: str) -> None:
        super().__init__(cfg, tokenizer, seq_len, arch)
        self.r = require_open_unit(cfg.noise_density, "objective.noise_density")
        self.mu = require_at_least(cfg.mean_span_length, "objective.mean_span_length", 1.0)
        if arch == "decoder":
            self.raw_length = decoder_raw_length_for(seq_len, self.r, self.mu)
        else:
            self.raw_length = raw_length_for(seq_len, self.r, self.mu)
        check_span_settings(self.r, self.mu, self.raw_length, self.special, seq_len)
        self.n_noise, self.n_spans, self.input_len, self._target_len = span_lengths(self.raw_length, self.r, self.mu)

    @property
    def window_length(self) -> int:
        return self.raw_length

    @property
    def target_length(self) -> int:
        return self._target_len if self.arch == "encoder-decoder" else 0

    def describe_attention(self) -> str:
        if self.arch == "decoder":
            return (
                "prefix: the corrupted input is seen whole by each of its positions; "
                "each target position sees the input and earlier targets"
            )
        return "encoder: bidirectional over the corrupted input; decoder: causal over targets, sees the whole input"

    def make_batch(self, windows: Windows, gen: torch.Generator) -> Batch:
        tokens = windows.tokens
        noise = torch.stack(
            [random_spans_noise_mask(self.raw_length, self.r, self.mu, gen) for _ in range(tokens.shape[0])]
        )
        inputs, targets = corrupt_spans(tokens, noise, self.special)
        if self.arch == "decoder":
            return prefix_lm_batch(inputs, targets, self.seq_len, self.special)
        return encoder_decoder_batch(inputs, targets, self.seq_len, self._target_len, self.special)
