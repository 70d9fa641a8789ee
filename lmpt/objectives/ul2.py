"""ul2-mixture: UL2's mixture of denoisers. Each example is made by one denoiser, chosen by weight, and
starts with that denoiser's mode token: R (regular spans) [NLU], X (extreme spans) [NLG], S (prefix LM) [S2S]."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import torch

from lmpt.batch import Batch
from lmpt.data.sampler import Windows
from lmpt.errors import LmptError
from lmpt.model.output import ModelOutput
from lmpt.objectives.base import Objective, ScoringFrame, Stats
from lmpt.objectives.checks import require_at_least, require_open_unit
from lmpt.objectives.measure import CorruptionLoss, Measure
from lmpt.objectives.prefix import PREFIX_ATTENTION
from lmpt.objectives.schema import ObjectiveConfig
from lmpt.objectives.sequences import encoder_decoder_batch, prefix_lm_batch
from lmpt.objectives.span import (
    check_span_settings,
    corrupt_spans,
    decoder_raw_length_for,
    random_spans_noise_mask,
    raw_length_for,
    span_lengths,
)
from lmpt.tokenizer.base import Tokenizer
from lmpt.tokenizer.special import SpecialTokens


def s_target_range(length: int, r: float) -> tuple[int, int]:
    """Inclusive range of the S denoiser's target length on a `length`-token text: uniform over a range
    centred on m = round(r*L), so the expected target fraction is r, with at least one token either side."""
    m = min(max(round(r * length), 1), length - 1)
    half = min(m - 1, length - 1 - m)
    return m - half, m + half


@dataclass(frozen=True)
class Denoiser:
    """One mixture component, sized for the model: how many raw tokens it reads and targets it makes."""

    kind: str
    mean_span_length: float
    noise_density: float
    weight: float
    label: str
    mode_token: int
    raw_length: int
    target_length: int
    """Longest target row (encoder-decoder), eos included."""
    eos_target: bool
    """S ends its target with eos (encoder-decoder, like R and X); the decoder-only form continues the text."""

    def make(
        self, row: torch.Tensor, gen: torch.Generator, special: SpecialTokens
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(prefix, target) from the first `raw_length` tokens of `row`; the prefix starts with the mode token."""
        raw = row[: self.raw_length]
        mode = torch.tensor([self.mode_token], dtype=torch.long)
        if self.kind == "S":
            low, high = s_target_range(self.raw_length, self.noise_density)
            split = self.raw_length - int(torch.randint(low, high + 1, (1,), generator=gen))
            target = raw[split:]
            if self.eos_target:
                target = torch.cat([target, torch.tensor([special.eos], dtype=torch.long)])
            return torch.cat([mode, raw[:split]]), target
        noise = random_spans_noise_mask(self.raw_length, self.noise_density, self.mean_span_length, gen)
        inputs, targets = corrupt_spans(raw[None], noise[None], special)
        return torch.cat([mode, inputs[0]]), targets[0]


def denoiser_label(kind: str, mu: float, r: float) -> str:
    """Name in the logs: R3-0.15, X64-0.5, S."""
    return "S" if kind == "S" else f"{kind}{mu:g}-{r:g}"


def build_denoisers(cfg: Ul2Config, special: SpecialTokens, seq_len: int, arch: str) -> list[Denoiser]:
    """Check `objective.denoisers` and size each for this model (raw window, target length)."""
    entries = list(cfg.denoisers)
    if not entries:
        raise LmptError("objective.denoisers is empty: give at least one denoiser")
    modes = {"R": special.nlu, "X": special.nlg, "S": special.s2s}
    denoisers, seen = [], set()
    for i, entry in enumerate(entries):
        key = f"objective.denoisers[{i}]"
        kind = str(entry.kind)
        if kind not in modes:
            raise LmptError(f"{key}.kind={kind} is unknown: use R, X or S")
        r = require_open_unit(entry.noise_density, f"{key}.noise_density")
        weight = float(entry.weight)
        if not weight >= 0:
            raise LmptError(f"{key}.weight={weight:g} must be >= 0")
        mu = float(entry.mean_span_length)
        label = denoiser_label(kind, mu, r)
        label = label if label not in seen else f"{label}#{i}"
        seen.add(label)
        if kind == "S":
            raw = seq_len
            target = s_target_range(raw, r)[1] + (arch == "encoder-decoder")  # eos ends an encoder-decoder target
        else:
            mu = require_at_least(mu, f"{key}.mean_span_length", 1.0)
            if arch == "encoder-decoder":
                raw = raw_length_for(seq_len - 1, r, mu)
            else:
                raw = decoder_raw_length_for(seq_len, r, mu, extra=1)
            check_span_settings(r, mu, raw, special, seq_len, what=f"ul2 denoiser {label} ({key})")
            target = span_lengths(raw, r, mu)[3]
        denoisers.append(Denoiser(kind, mu, r, weight, label, modes[kind], raw, target, arch == "encoder-decoder"))
    if not sum(d.weight for d in denoisers) > 0:
        raise LmptError("objective.denoisers weights sum to 0: give at least one a positive weight")
    return denoisers


@dataclass
class DenoiserConfig:
    kind: str = "R"
    """R (regular span corruption), X (extreme span corruption) or S (sequential, prefix LM)."""
    mean_span_length: float = 3.0
    """Mean span length (R and X)."""
    noise_density: float = 0.15
    """Corrupted fraction for R and X; expected target fraction for S."""
    weight: float = 1.0
    """Relative probability of choosing this denoiser for an example."""


def _ul2_denoisers() -> list[DenoiserConfig]:
    return [
        DenoiserConfig("R", 3.0, 0.15),
        DenoiserConfig("R", 8.0, 0.15),
        DenoiserConfig("S", 0.0, 0.25),
        DenoiserConfig("X", 3.0, 0.5),
        DenoiserConfig("X", 8.0, 0.5),
        DenoiserConfig("X", 64.0, 0.15),
        DenoiserConfig("X", 64.0, 0.5),
    ]


@dataclass
class Ul2Config(ObjectiveConfig):
    name: str = "ul2-mixture"
    denoisers: list[DenoiserConfig] = field(default_factory=_ul2_denoisers)
    """The mixture: each entry's kind, mean span length, rate and weight (default: UL2's seven, uniform)."""


class Ul2Mixture(Objective):
    """UL2: per example one denoiser (R/X span corruption or S prefix LM) with its mode token prepended."""

    name: ClassVar[str] = "ul2-mixture"
    config_class: ClassVar[type] = Ul2Config
    cfg: Ul2Config
    natural_arch: ClassVar[str] = "encoder-decoder"
    supported_archs: ClassVar[tuple[str, ...]] = ("encoder-decoder", "decoder")
    measure_class: ClassVar[type[Measure]] = CorruptionLoss

    listing_order: ClassVar[int] = 5
    reference_order: ClassVar[int] = 6
    reads_prefix: ClassVar[bool] = True

    @classmethod
    def scoring_frame(cls, special: SpecialTokens, context: list[int], target: list[int]) -> ScoringFrame:
        """[S2S] + context as the prefix (decoder) or encoder input: the S denoiser's form."""
        return ScoringFrame([special.s2s], context, [], target)

    @classmethod
    def span_filling_prefix(cls, special: SpecialTokens) -> list[int]:
        """The R denoiser's mode token: filling sentinel spans is its task."""
        return [special.nlu]

    def preview_legend(self) -> list[tuple[str, str]]:
        return [*super().preview_legend(), ("sentinel", "sentinel"), ("mode token", "mode")]

    def preview_settings(self) -> list[str]:
        return ["denoisers " + ", ".join(f"{d.label} (weight {d.weight:g})" for d in self.denoisers)]

    def __init__(self, cfg: Ul2Config, tokenizer: Tokenizer, seq_len: int, arch: str) -> None:
        super().__init__(cfg, tokenizer, seq_len, arch)
        if seq_len < 4:
            raise LmptError(f"data.seq_len={seq_len} is too short for ul2-mixture: use at least 4")
        self.denoisers = build_denoisers(cfg, self.special, seq_len, arch)
        self.weights = torch.tensor([d.weight for d in self.denoisers], dtype=torch.float64)

    @property
    def window_length(self) -> int:
        return max(d.raw_length for d in self.denoisers)

    @property
    def target_length(self) -> int:
        return max(d.target_length for d in self.denoisers) if self.arch == "encoder-decoder" else 0

    def describe_attention(self) -> str:
        if self.arch == "decoder":
            return PREFIX_ATTENTION + " (prefix = mode token + corrupted input or context)"
        return "encoder: bidirectional over mode token + input; decoder: causal over targets, sees the whole input"

    def make_batch(self, windows: Windows, gen: torch.Generator) -> Batch:
        tokens = windows.tokens
        kinds = torch.multinomial(self.weights, tokens.shape[0], replacement=True, generator=gen)
        pairs = [self.denoisers[k].make(row, gen, self.special) for row, k in zip(tokens, kinds.tolist(), strict=True)]
        prefixes, targets = [p for p, _ in pairs], [t for _, t in pairs]
        if self.arch == "decoder":
            batch = prefix_lm_batch(prefixes, targets, self.seq_len, self.special)
        else:
            batch = encoder_decoder_batch(prefixes, targets, self.seq_len, self.target_length, self.special)
        batch.example_kinds = kinds
        return batch

    def loss(self, out: ModelOutput, batch: Batch) -> tuple[torch.Tensor, Stats]:
        """The mean over all loss-bearing tokens, with loss/<denoiser> (sum, count) per denoiser."""
        total, stats = super().loss(out, batch)
        assert batch.example_kinds is not None, "ul2's batches name each example's denoiser"
        kinds = batch.example_kinds.to(out.token_rows.device)[out.token_rows]
        for i, d in enumerate(self.denoisers):
            mine = kinds == i
            stats[f"loss/{d.label}"] = (out.token_loss.detach()[mine].sum(), mine.sum())
        return total, stats
