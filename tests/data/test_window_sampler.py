"""WindowSampler is a pure function of (seed, step, micro_step, rank); ValidationWindows never changes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lmpt.data.cache import PreparedData
from lmpt.data.corpus import TokenCorpus
from lmpt.data.sampler import StepLayout, ValidationWindows, WindowSampler
from lmpt.errors import LmptError

W = 64


def _tiny_corpus(n_tokens: int) -> TokenCorpus:
    tokens = np.arange(n_tokens, dtype=np.uint16) + 10
    tokens[-1] = 3
    return TokenCorpus(
        tokens=tokens,
        doc_offsets=np.array([0, n_tokens], dtype=np.int64),
        sent_offsets=np.array([0, n_tokens], dtype=np.int64),
        doc_sent_offsets=np.array([0, 1], dtype=np.int64),
    )


def test_same_coordinates_same_windows(shakespeare: PreparedData) -> None:
    a = WindowSampler(shakespeare.train, W, StepLayout(8, rank=1, world_size=2, grad_accum=2), seed=7)
    b = WindowSampler(shakespeare.train, W, StepLayout(8, rank=1, world_size=2, grad_accum=2), seed=7)
    wa, wb = a.windows(5, 1), b.windows(5, 1)
    assert torch.equal(wa.tokens, wb.tokens) and torch.equal(wa.starts, wb.starts)
    assert wa.tokens.shape == (8, W) and wa.tokens.dtype == torch.int64 and wa.starts.dtype == torch.int64
    assert wa.corpus is shakespeare.train
    for row, start in zip(wa.tokens, wa.starts, strict=True):
        assert torch.equal(row, torch.from_numpy(shakespeare.train.window(int(start), W)))
    other_seed = WindowSampler(shakespeare.train, W, StepLayout(8, rank=1, world_size=2, grad_accum=2), seed=8)
    assert not torch.equal(other_seed.windows(5, 1).starts, wa.starts)


def test_ranks_and_micro_steps_partition_the_sample_stream(shakespeare: PreparedData) -> None:
    single = WindowSampler(shakespeare.train, W, StepLayout(4), seed=1)
    ranks = [WindowSampler(shakespeare.train, W, StepLayout(4, rank=r, world_size=2), seed=1) for r in (0, 1)]
    assert not torch.equal(ranks[0].windows(3).starts, ranks[1].windows(3).starts)
    # world_size 2 at step 3 sees what one process sees at steps 6 and 7
    assert torch.equal(ranks[0].windows(3).starts, single.windows(6).starts)
    assert torch.equal(ranks[1].windows(3).starts, single.windows(7).starts)
    accum = WindowSampler(shakespeare.train, W, StepLayout(4, grad_accum=3), seed=1)
    assert torch.equal(accum.windows(2, 1).starts, single.windows(7).starts)


def test_seek_does_not_depend_on_history(shakespeare: PreparedData) -> None:
    fresh = WindowSampler(shakespeare.train, W, StepLayout(16), seed=3)
    replayed = WindowSampler(shakespeare.train, W, StepLayout(16), seed=3)
    late = 2 * fresh.n_windows // 16 + 5  # well into the third epoch
    for step in range(0, late, 37):
        replayed.windows(step)
    assert torch.equal(fresh.windows(late).tokens, replayed.windows(late).tokens)
    assert torch.equal(fresh.windows(4).starts, replayed.windows(4).starts)  # and back again


def test_an_epoch_visits_each_window_once(shakespeare: PreparedData) -> None:
    sampler = WindowSampler(shakespeare.train, W, StepLayout(32), seed=11)
    n = sampler.n_windows
    assert n == (shakespeare.train.n_tokens - (W - 1)) // W
    steps = -(-n // 32) + 1
    starts = np.concatenate([sampler.starts(s) for s in range(steps)])
    first, second = starts[:n], starts[n : 2 * n]
    assert len(set(first.tolist())) == n
    assert len(set((first % W).tolist())) == 1  # one shift per epoch
    assert first.min() >= 0 and first.max() + W <= shakespeare.train.n_tokens
    assert first[: len(second)].tolist() != second.tolist()  # the next epoch reshuffles
    assert abs(sampler.epoch_of(steps) - steps * 32 / n) < 1e-9


def test_too_small_corpus_is_refused() -> None:
    with pytest.raises(LmptError, match="the training text has 10 tokens, fewer than one window of 16: .*data.seq_len"):
        WindowSampler(_tiny_corpus(10), 16, StepLayout(2), seed=0)
    with pytest.raises(LmptError, match="the validation text has 10 tokens, fewer than one window of 16"):
        ValidationWindows(_tiny_corpus(10), 16, batch_size=2, n_batches=2)
    exact = WindowSampler(_tiny_corpus(16), 16, StepLayout(3), seed=0)
    assert exact.starts(0).tolist() == [0, 0, 0] and exact.starts(9).tolist() == [0, 0, 0]
    one_spare = WindowSampler(_tiny_corpus(17), 16, StepLayout(64), seed=0)
    assert set(one_spare.starts(0).tolist()) <= {0, 1}


def test_validation_windows_are_fixed_and_spread(shakespeare: PreparedData) -> None:
    val = shakespeare.val
    windows = ValidationWindows(val, W, batch_size=4, n_batches=3)
    assert len(windows) == 3
    starts = torch.cat([windows.batch(i).starts for i in range(3)])
    again = ValidationWindows(val, W, batch_size=4, n_batches=3)
    assert torch.equal(starts, torch.cat([again.batch(i).starts for i in range(3)]))
    assert len(set(starts.tolist())) == 12 and torch.all(starts[1:] - starts[:-1] >= W)
    assert int(starts[-1]) > val.n_tokens // 2  # spread over the whole held-out text
    batch = windows.batch(1)
    assert batch.tokens.shape == (4, W) and batch.tokens.dtype == torch.int64
    assert torch.equal(batch.tokens[2], torch.from_numpy(val.window(int(batch.starts[2]), W)))
    with pytest.raises(IndexError):
        windows.batch(3)


def test_validation_windows_wrap_around_a_small_corpus() -> None:
    windows = ValidationWindows(_tiny_corpus(50), 16, batch_size=4, n_batches=2)
    starts = torch.cat([windows.batch(i).starts for i in range(2)]).tolist()
    assert starts == [0, 16, 32, 0, 16, 32, 0, 16]
