"""The sampler's window order: a keyed bijection computed per window, so memory does not grow with the corpus."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from lmpt.data.corpus import TokenCorpus
from lmpt.data.permutation import FeistelPermutation
from lmpt.data.sampler import StepLayout, WindowSampler


def test_every_size_is_a_bijection_exhaustively() -> None:
    for n in [*range(1, 300), 1023, 1024, 1025, 4097, 65537]:
        for key in (0, 1, 2**62 + 12345):
            image = FeistelPermutation(n, key)(np.arange(n))
            assert np.array_equal(np.sort(image), np.arange(n)), (n, key)


def test_the_key_chooses_the_order_and_nothing_else_does() -> None:
    n = 10_000
    a, again, b = FeistelPermutation(n, 7), FeistelPermutation(n, 7), FeistelPermutation(n, 8)
    i = np.arange(n)
    assert np.array_equal(a(i), again(i)) and not np.array_equal(a(i), b(i))
    assert np.array_equal(a(i[::-1][:5]), a(i)[::-1][:5])  # any subset, in any order: a pure function
    assert np.mean(a(i) == i) < 0.01  # not near the identity
    assert abs(np.corrcoef(a(i)[:-1], a(i)[1:])[0, 1]) < 0.05  # neighbours land far apart
    with pytest.raises(IndexError):
        a(np.array([n]))


def _corpus(n_tokens: int) -> TokenCorpus:
    tokens = np.broadcast_to(np.uint16(7), (n_tokens,))  # no memory, whatever its length
    offsets = np.array([0, n_tokens], dtype=np.int64)
    return TokenCorpus(tokens, offsets, offsets, np.array([0, 1], dtype=np.int64))


@pytest.mark.parametrize("n_tokens,window,batch,world", [(1000, 7, 5, 1), (4096, 16, 3, 2), (777, 10, 8, 3)])
def test_every_window_once_per_epoch_for_every_rank_together(n_tokens: int, window: int, batch: int, world: int):
    ranks = [
        WindowSampler(_corpus(n_tokens), window, StepLayout(batch, rank=r, world_size=world), seed=5)
        for r in range(world)
    ]
    n = ranks[0].n_windows
    per_step = batch * world
    steps = 3 * n // per_step + 2
    stream = np.concatenate([r.starts(s) for s in range(steps) for r in ranks])  # the run's sample order
    for epoch in range(3):
        starts = stream[epoch * n : (epoch + 1) * n]
        shift = int(starts[0] % window)
        assert np.array_equal(np.sort(starts), np.arange(n) * window + shift), epoch
        assert starts.max() + window <= n_tokens
    assert not np.array_equal(stream[:n] // window, stream[n : 2 * n] // window)  # every epoch reshuffles


def test_sampler_memory_is_flat_in_corpus_size() -> None:
    """A trillion tokens (15.6e9 windows: a materialised int64 permutation would be 125 GB): the sampler
    seeks anywhere in well under a megabyte."""
    corpus = _corpus(10**12)
    tracemalloc.start()
    sampler = WindowSampler(corpus, 64, StepLayout(16, rank=3, world_size=8, grad_accum=4), seed=1)
    starts = sampler.starts(10**8, 2)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert sampler.n_windows == (10**12 - 63) // 64
    assert len(set(starts.tolist())) == 16 and starts.max() + 64 <= 10**12
    assert peak < 1 << 20, peak
