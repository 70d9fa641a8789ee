"""prefix: uniform split points, loss only on the suffix, labels shifted once."""

from __future__ import annotations

import pytest
import torch
from objective_helpers import assert_int64, assert_same_batch, batches, five_sigma, windows

from lmpt.batch import IGNORE
from lmpt.objectives.prefix import PrefixConfig, split_range
from lmpt.objectives.registry import build_objective
from lmpt.rng import generator

SEQ_LEN = 16


@pytest.mark.parametrize("split_min, split_max, low, high", [(0.0, 1.0, 1, 15), (0.25, 0.5, 4, 8), (0.3, 0.9, 5, 14)])
def test_split_points_are_uniform_on_the_range(shakespeare, split_min, split_max, low, high) -> None:
    assert split_range(SEQ_LEN, split_min, split_max) == (low, high)
    cfg = PrefixConfig(split_min=split_min, split_max=split_max)
    prefix = build_objective(cfg, shakespeare.tokenizer, SEQ_LEN, "auto")
    splits = torch.cat([b.prefix_len for _, b in batches(prefix, shakespeare.train, 64, 60)])
    n, p = splits.numel(), 1 / (high - low + 1)
    for k in range(low, high + 1):
        assert abs(int((splits == k).sum()) - n * p) <= five_sigma(n, p), k
    assert int(((splits < low) | (splits > high)).sum()) == 0


def test_labels_only_on_the_suffix(shakespeare) -> None:
    prefix = build_objective(PrefixConfig(), shakespeare.tokenizer, SEQ_LEN, "auto")
    assert prefix.window_length == SEQ_LEN + 1
    for w, batch in batches(prefix, shakespeare.train, 32, 4):
        assert_int64(batch)
        assert batch.attention == "prefix" and batch.input_ids.shape == batch.labels.shape == (32, SEQ_LEN)
        assert torch.equal(batch.input_ids, w.tokens[:, :-1])
        positions = torch.arange(SEQ_LEN)[None]
        # the last prefix position, which sees only the prefix, predicts the first suffix token
        predicts_suffix = positions >= batch.prefix_len[:, None] - 1
        assert ((batch.labels != IGNORE) == predicts_suffix).all()
        assert torch.equal(batch.labels[predicts_suffix], w.tokens[:, 1:][predicts_suffix])


def test_prefix_and_labels_rebuild_the_window(shakespeare) -> None:
    """Every suffix token is a target: an (L+1-k)-token suffix gives L+1-k labels, none skipped."""
    prefix = build_objective(PrefixConfig(), shakespeare.tokenizer, SEQ_LEN, "auto")
    for w, batch in batches(prefix, shakespeare.train, 64, 4):
        for row in range(64):
            k = int(batch.prefix_len[row])
            labels = batch.labels[row][batch.labels[row] != IGNORE]
            assert labels.numel() == SEQ_LEN + 1 - k
            assert batch.input_ids[row, :k].tolist() + labels.tolist() == w.tokens[row].tolist()


def test_same_seed_same_batch(shakespeare) -> None:
    prefix = build_objective(PrefixConfig(), shakespeare.tokenizer, 64, "auto")
    w = windows(shakespeare.train, prefix.window_length, 8, step=1)
    assert_same_batch(prefix.make_batch(w, generator(5, 1)), prefix.make_batch(w, generator(5, 1)))
