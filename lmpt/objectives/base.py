"""The contract every objective meets: a pure transform from token windows to a Batch, and its loss."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch import nn

from lmpt.batch import Batch
from lmpt.data.windows import Windows
from lmpt.model.build import build_model
from lmpt.model.output import ModelOutput

if TYPE_CHECKING:
    from lmpt.data.corpus import TokenCorpus
    from lmpt.tokenizer.base import Tokenizer

Stats = dict[str, tuple[torch.Tensor, torch.Tensor]]
"""Metric name -> (sum, count); the trainer adds them up over micro-steps and reports sum / count."""

class Objective(ABC):
    """Subclasses set the class attributes and implement `window_length` and `make_batch`."""

    name: ClassVar[str]
    natural_arch: ClassVar[str]
    supported_archs: ClassVar[tuple[str, ...]]
    n_segments: ClassVar[int] = 0
    """Segment embeddings the model needs (nsp: 2)."""
    n_sequence_classes: ClassVar[int] = 0
    """Classes of the sequence head on the first position (nsp/sop: 2)."""
    perplexity_of: ClassVar[str] = "loss"
    """The stats entry (a token-level loss) whose exp is reported as perplexity."""

    def __init__(self, cfg: Any, tokenizer: Tokenizer, seq_len: int, arch: str) -> None:
        self.cfg = cfg
        self.tokenizer = tokenizer
        self.special = tokenizer.special
        self.vocab_size = tokenizer.vocab_size
        self.seq_len = seq_len
        self.arch = arch

    @property
    @abstractmethod
    def window_length(self) -> int:
        """Raw corpus tokens per example the sampler must provide."""

    @property
    def target_length(self) -> int:
        """Decoder length of an encoder-decoder batch (0 for single-stack architectures)."""
        return 0

    @property
    def expected_loss_fraction(self) -> float:
        """Expected share of the positions the head scores (target_length, else seq_len) that carry loss; a
        compute budget turns FLOPs into steps with it."""
        return 1.0

    @abstractmethod
    def make_batch(self, windows: Windows, gen: torch.Generator) -> Batch:
        """Turn windows into a batch; every random draw comes from `gen` (seeded by (seed, step, ...))."""

    def build_model(self, model_cfg: Any, model_vocab: int) -> nn.Module:
        """A freshly initialised model for this objective (the objective decides the architecture): a
        LanguageModel of `self.arch`; electra overrides it with its generator and discriminator."""
        return build_model(
            model_cfg, self.arch, model_vocab, self.special.pad, self.n_segments, self.n_sequence_classes
        )

    def check_corpus(self, corpus: TokenCorpus, text: str) -> None:  # noqa: B027 (optional hook)
        """Refuse a corpus this objective cannot use: one LmptError line naming `text` (which split, from which
        files: "the validation text (data.val_paths=[...])") and what to do. Most objectives take any."""

    def loss(self, out: ModelOutput, batch: Batch) -> tuple[torch.Tensor, Stats]:
        """Mean cross-entropy over loss-bearing tokens, with token accuracy."""
        n = torch.tensor(out.token_loss.numel(), device=out.token_loss.device)
        stats: Stats = {
            "loss": (out.token_loss.sum().detach(), n),
            "acc": (out.token_correct.sum(), n),
        }
        return out.token_loss.mean(), stats
