"""Which windows of the corpus a step sees: a pure function of (seed, step, micro_step, rank)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from lmpt.data.corpus import TokenCorpus
from lmpt.data.permutation import FeistelPermutation
from lmpt.errors import SmallTextError
from lmpt.rng import derive_seed

Span = tuple[int, int]
"""[start, end) token offsets of one source's text inside a split."""


@dataclass
class Windows:
    """B windows of consecutive corpus tokens. Documents in the stream end with eos, so a window may
    span several documents. `corpus` gives random access for objectives that look beyond the window
    (nsp draws its random second segment from another document)."""

    tokens: torch.Tensor  # [B, W] int64
    starts: torch.Tensor  # [B] int64: corpus offset of each window's first token
    corpus: TokenCorpus


def _span_of(corpus: TokenCorpus, span: Span | None) -> Span:
    return span if span is not None else (0, corpus.n_tokens)


def _check_fits(n_tokens: int, window_length: int, what: str) -> None:
    if window_length < 1:
        raise ValueError(f"window_length must be positive, got {window_length}")
    if n_tokens < window_length:
        raise SmallTextError(
            f"the {what} text has {n_tokens} tokens, fewer than one window of {window_length}: "
            "add text or lower data.seq_len"
        )


def gather_windows(corpus: TokenCorpus, starts: np.ndarray, window_length: int) -> Windows:
    """Windows of `window_length` tokens at `starts` as int64 tensors."""
    rows = np.stack([corpus.window(int(s), window_length) for s in starts])
    return Windows(
        tokens=torch.from_numpy(rows),
        starts=torch.from_numpy(np.asarray(starts, dtype=np.int64)),
        corpus=corpus,
    )


@dataclass(frozen=True)
class StepLayout:
    """How a run's samples are dealt out: `batch_size` windows a micro-batch, `grad_accum` micro-batches an
    optimizer step on each of `world_size` ranks, this process being `rank`."""

    batch_size: int
    rank: int = 0
    world_size: int = 1
    grad_accum: int = 1

    def sample_index(self, step: int, micro_step: int) -> int:
        """Global index of the first sample of this rank's micro-batch."""
        return ((step * self.grad_accum + micro_step) * self.world_size + self.rank) * self.batch_size


class StepSamples:
    """Sample g of the run is ((step*grad_accum + micro_step)*world_size + rank)*batch_size + i (`layout`); a
    sampler turns sample indices into window starts (`starts_of`), ordered by `seed`."""

    corpus: TokenCorpus
    window_length: int
    n_windows: int

    def __init__(self, layout: StepLayout, seed: int) -> None:
        self.layout = layout
        self.seed = seed

    def starts_of(self, samples: np.ndarray) -> np.ndarray:
        """Corpus offsets of the windows of these sample indices."""
        raise NotImplementedError

    def sample_index(self, step: int, micro_step: int) -> int:
        """Global index of the first sample of this rank's micro-batch."""
        return self.layout.sample_index(step, micro_step)

    def epoch_of(self, step: int) -> float:
        """How many passes over the training windows have been made by the start of `step`."""
        return self.sample_index(step, 0) / self.n_windows

    def starts(self, step: int, micro_step: int = 0) -> np.ndarray:
        """Corpus offsets of the windows of (step, micro_step) for this rank."""
        return self.starts_of(self.sample_index(step, micro_step) + np.arange(self.layout.batch_size, dtype=np.int64))

    def windows(self, step: int, micro_step: int = 0) -> Windows:
        """The [batch_size, window_length] token windows of (step, micro_step) for this rank."""
        return gather_windows(self.corpus, self.starts(step, micro_step), self.window_length)


class WindowSampler(StepSamples):
    """Training windows by epochs: each epoch visits every one of `n_windows` non-overlapping windows of
    the corpus (or of its `span`) once in a seeded pseudo-random order (a Feistel permutation computed per
    window: O(1) memory), all shifted by a seeded offset so epochs see different cuts."""

    def __init__(
        self,
        corpus: TokenCorpus,
        window_length: int,
        layout: StepLayout,
        seed: int,
        span: Span | None = None,
        what: str = "training",
    ) -> None:
        super().__init__(layout, seed)
        self.first, end = _span_of(corpus, span)
        n, w = end - self.first, window_length
        _check_fits(n, w, what)
        self.corpus = corpus
        self.window_length = window_length
        self.n_windows = max(1, (n - (w - 1)) // w)
        # shifts stay below w and keep the last window inside the span
        self.max_shift = min(w, n - self.n_windows * w + 1)

    def _epoch(self, epoch: int) -> tuple[FeistelPermutation, int]:
        """(order of the window indices, shift) of `epoch`: a few integers, whatever the corpus size."""
        order = FeistelPermutation(self.n_windows, derive_seed(self.seed, "epoch", epoch))
        return order, derive_seed(self.seed, "shift", epoch) % self.max_shift

    def starts_of(self, samples: np.ndarray) -> np.ndarray:
        """Sample k is window order_e(k mod n) of epoch e = k // n."""
        epochs, positions = np.divmod(np.asarray(samples, dtype=np.int64), self.n_windows)
        out = np.empty(len(epochs), dtype=np.int64)
        for epoch in np.unique(epochs).tolist():  # a batch spans at most a few epochs
            order, shift = self._epoch(epoch)
            here = epochs == epoch
            out[here] = self.first + order(positions[here]) * self.window_length + shift
        return out


class ValidationWindows:
    """The same `n_batches` batches at every evaluation: windows evenly spaced over the held-out text
    (or its `span`), wrapping around (repeating windows) when it holds fewer than batch_size * n_batches."""

    def __init__(
        self,
        corpus: TokenCorpus,
        window_length: int,
        batch_size: int,
        n_batches: int,
        span: Span | None = None,
        what: str = "validation",
    ) -> None:
        first, end = _span_of(corpus, span)
        n_tokens = end - first
        _check_fits(n_tokens, window_length, what)
        self.corpus = corpus
        self.window_length = window_length
        self.batch_size = batch_size
        self.n_batches = n_batches
        total = batch_size * n_batches
        available = n_tokens // window_length
        k = np.arange(total, dtype=np.int64)
        if total <= available:
            self._starts = first + k * (n_tokens // total)
        else:
            self._starts = first + (k % available) * window_length

    def __len__(self) -> int:
        return self.n_batches

    def batch(self, i: int) -> Windows:
        """Validation batch i (0 <= i < n_batches)."""
        if not 0 <= i < self.n_batches:
            raise IndexError(f"validation batch {i} out of range: there are {self.n_batches}")
        starts = self._starts[i * self.batch_size : (i + 1) * self.batch_size]
        return gather_windows(self.corpus, starts, self.window_length)
