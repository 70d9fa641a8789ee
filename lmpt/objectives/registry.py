"""Objective name -> class, the architecture it trains, and its start-up checks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from lmpt.config.choices import ARCHITECTURES
from lmpt.errors import LmptError
from lmpt.objectives.base import Objective
from lmpt.objectives.clm import CausalLM
from lmpt.objectives.electra import ReplacedTokenDetection
from lmpt.objectives.fim import FillInTheMiddle
from lmpt.objectives.mlm import MaskedLM
from lmpt.objectives.mtp import MultiTokenPredictionLM
from lmpt.objectives.nsp import NextSentencePrediction
from lmpt.objectives.prefix import PrefixLM
from lmpt.objectives.span import SpanCorruption
from lmpt.objectives.ul2 import Ul2Mixture
from lmpt.tokenizer.base import Tokenizer
from lmpt.tokenizer.load import load_tokenizer
from lmpt.tokenizer.special import SpecialTokens

OBJECTIVES: dict[str, type[Objective]] = {
    cls.name: cls
    for cls in (
        CausalLM,
        MaskedLM,
        NextSentencePrediction,
        SpanCorruption,
        PrefixLM,
        Ul2Mixture,
        ReplacedTokenDetection,
        MultiTokenPredictionLM,
        FillInTheMiddle,
    )
}


def _article(arch: str) -> str:
    return f"an {arch}" if arch[0] in "aeiou" else f"a {arch}"


def resolve_arch(cls: type[Objective], requested_arch: str) -> str:
    """`auto` -> the objective's natural architecture; an explicit one must be supported."""
    if requested_arch == "auto":
        return cls.natural_arch
    if requested_arch not in ARCHITECTURES:
        raise LmptError(f"model.arch={requested_arch} is unknown: use auto, {', '.join(ARCHITECTURES)}")
    if requested_arch not in cls.supported_archs:
        raise LmptError(
            f"objective {cls.name} cannot train {_article(requested_arch)} (model.arch={requested_arch}): "
            f"use model.arch=auto or {' or '.join(cls.supported_archs)}"
        )
    return requested_arch


def build_objective(cfg: Any, tokenizer: Tokenizer, seq_len: int, requested_arch: str) -> Objective:
    """The objective `cfg.name` for this tokenizer and model input length; refuses bad settings (LmptError)."""
    cls = OBJECTIVES.get(str(cfg.name))
    if cls is None:
        raise LmptError(f"objective={cfg.name} is unknown: choose one of {', '.join(OBJECTIVES)}")
    if seq_len < 2:
        raise LmptError(f"data.seq_len={seq_len} is too short: use at least 2")
    return cls(cfg, tokenizer, seq_len, resolve_arch(cls, requested_arch))


@dataclass(frozen=True)
class PlannedTokenizer:
    """The tokenizer a config asks for, before it is trained: enough to check objective settings up front."""

    special: SpecialTokens
    vocab_size: int

    def word_starts(self) -> torch.Tensor:
        return torch.ones(self.vocab_size, dtype=torch.bool)


def preflight_objective(cfg: Any, tokenizer_cfg: Any, seq_len: int, requested_arch: str) -> None:
    """Refuse bad objective settings before any data work. A user-supplied tokenizer file is only known once
    loaded, so then only the architecture is checked here; build_objective checks the rest."""
    if tokenizer_cfg.backend == "hf":  # the pretrained file is known: check against its real roles now
        pretrained = load_tokenizer(tokenizer_cfg.path, "tokenizer.path", tokenizer_cfg.num_sentinels)
        build_objective(cfg, pretrained, seq_len, requested_arch)
        return
    if tokenizer_cfg.model_file:
        cls = OBJECTIVES.get(str(cfg.name))
        if cls is not None:
            resolve_arch(cls, requested_arch)
        return
    planned = PlannedTokenizer(SpecialTokens(num_sentinels=tokenizer_cfg.num_sentinels), tokenizer_cfg.vocab_size)
    build_objective(cfg, planned, seq_len, requested_arch)  # type: ignore[arg-type]
