"""Which windows of the corpus a step sees: a pure function of (seed, step, micro_step, rank)."""

from __future__ import annotations

import numpy as np
import torch

from lmpt.batch import Windows
from lmpt.data.corpus import TokenCorpus
from lmpt.data.permutation import FeistelPermutation
from lmpt.errors import LmptError
from lmpt.rng import derive_seed


def _check_fits(corpus: TokenCorpus, window_length: int, what: str) -> None:
    if window_length < 1:
        raise ValueError(f"window_length must be positive, got {window_length}")
    if corpus.n_tokens < window_length:
        raise LmptError(
            f"the {what} text has {corpus.n_tokens} tokens, fewer than one window of {window_length}: "
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


class WindowSampler:
    """Training windows by epochs: each epoch visits every one of `n_windows` non-overlapping windows
    once in a seeded pseudo-random order (a Feistel permutation computed per window: O(1) memory), all
    shifted by a seeded offset so epochs see different cuts.
    Sample g of the run is ((step*grad_accum + micro_step)*world_size + rank)*batch_size + i."""

    def __init__(
        self,
        corpus: TokenCorpus,
        window_length: int,
        batch_size: int,
        seed: int,
        rank: int = 0,
        world_size: int = 1,
        grad_accum: int = 1,
    ) -> None:
        _check_fits(corpus, window_length, "training")
        self.corpus = corpus
        self.window_length = window_length
        self.batch_size = batch_size
        self.seed = seed
        self.rank = rank
        self.world_size = world_size
        self.grad_accum = grad_accum
        n, w = corpus.n_tokens, window_length
        self.n_windows = max(1, (n - (w - 1)) // w)
        # shifts stay below w and keep the last window inside the corpus
        self.max_shift = min(w, n - self.n_windows * w + 1)

    def _epoch(self, epoch: int) -> tuple[FeistelPermutation, int]:
        """(order of the window indices, shift) of `epoch`: a few integers, whatever the corpus size."""
        order = FeistelPermutation(self.n_windows, derive_seed(self.seed, "epoch", epoch))
        return order, derive_seed(self.seed, "shift", epoch) % self.max_shift

    def sample_index(self, step: int, micro_step: int) -> int:
        """Global index of the first sample of this rank's micro-batch."""
        return ((step * self.grad_accum + micro_step) * self.world_size + self.rank) * self.batch_size

    def epoch_of(self, step: int) -> float:
        """How many passes over the training windows have been made by the start of `step`."""
        return self.sample_index(step, 0) / self.n_windows

    def starts(self, step: int, micro_step: int = 0) -> np.ndarray:
        """Corpus offsets of the windows of (step, micro_step) for this rank."""
        samples = self.sample_index(step, micro_step) + np.arange(self.batch_size, dtype=np.int64)
        epochs, positions = np.divmod(samples, self.n_windows)
        out = np.empty(self.batch_size, dtype=np.int64)
        for epoch in np.unique(epochs).tolist():  # a batch spans at most a few epochs
            order, shift = self._epoch(epoch)
            here = epochs == epoch
            out[here] = order(positions[here]) * self.window_length + shift
        return out

    def windows(self, step: int, micro_step: int = 0) -> Windows:
        """The [batch_size, window_length] token windows of (step, micro_step) for this rank."""
        return gather_windows(self.corpus, self.starts(step, micro_step), self.window_length)


class ValidationWindows:
    """The same `n_batches` batches at every evaluation: windows evenly spaced over the held-out text,
    wrapping around (repeating windows) when it holds fewer than batch_size * n_batches."""

    def __init__(self, corpus: TokenCorpus, window_length: int, batch_size: int, n_batches: int) -> None:
        _check_fits(corpus, window_length, "validation")
        self.corpus = corpus
        self.window_length = window_length
        self.batch_size = batch_size
        self.n_batches = n_batches
        total = batch_size * n_batches
        available = corpus.n_tokens // window_length
        k = np.arange(total, dtype=np.int64)
        if total <= available:
            self._starts = k * (corpus.n_tokens // total)
        else:
            self._starts = (k % available) * window_length

    def __len__(self) -> int:
        return self.n_batches

    def batch(self, i: int) -> Windows:
        """Validation batch i (0 <= i < n_batches)."""
        if not 0 <= i < self.n_batches:
            raise IndexError(f"validation batch {i} out of range: there are {self.n_batches}")
        starts = self._starts[i * self.batch_size : (i + 1) * self.batch_size]
        return gather_windows(self.corpus, starts, self.window_length)
