"""span: T5 lengths, exact noise and span counts, sentinel order and the round trip to the window."""

from __future__ import annotations

import pytest
import torch
from objective_helpers import (
    FakeTokenizer,
    assert_int64,
    assert_same_batch,
    batches,
    five_sigma,
    uncorrupt_spans,
    windows,
)

from lmpt.batch import IGNORE
from lmpt.objectives.registry import build_objective
from lmpt.objectives.span import SpanConfig, random_segmentation, random_spans_noise_mask, raw_length_for, span_lengths
from lmpt.rng import generator

SETTINGS = [(0.15, 3.0), (0.5, 8.0), (0.15, 64.0), (0.3, 1.0)]


# T5's random_spans_helper at inputs_length 512 for UL2's six span settings and one more length:
# (inputs_length, noise_density, mean_noise_span_length) -> (raw tokens_length, targets_length)
T5_LENGTHS = [
    ((512, 0.15, 3.0), (568, 114)),
    ((512, 0.15, 8.0), (588, 100)),
    ((512, 0.15, 64.0), (600, 92)),
    ((512, 0.5, 3.0), (766, 512)),
    ((512, 0.5, 8.0), (908, 512)),
    ((512, 0.5, 64.0), (1006, 512)),
    ((128, 0.5, 3.0), (190, 128)),
]


def test_t5_lengths() -> None:
    assert span_lengths(568, 0.15, 3.0) == (85, 28, 512, 114)
    assert raw_length_for(512, 0.15, 3.0) == 568


@pytest.mark.parametrize("setting, lengths", T5_LENGTHS)
def test_raw_and_target_lengths_are_t5s(setting: tuple[int, float, float], lengths: tuple[int, int]) -> None:
    input_length, r, mu = setting
    cfg = SpanConfig(noise_density=r, mean_span_length=mu)
    span = build_objective(cfg, FakeTokenizer(1024, num_sentinels=200), input_length, "auto")
    assert (span.window_length, span.target_length) == lengths
    assert span.input_len <= input_length and span.target_length <= input_length


@pytest.mark.parametrize("r, mu", SETTINGS)
@pytest.mark.parametrize("input_length", [16, 128, 512])
def test_raw_length_is_the_largest_that_fits(input_length: int, r: float, mu: float) -> None:
    """The largest raw window whose input fits; at r = 0.5 one less if its targets would outgrow the inputs."""
    fits = max(raw for raw in range(2, 4 * input_length) if span_lengths(raw, r, mu)[2] <= input_length)
    _, _, inputs, targets = span_lengths(fits, r, mu)
    assert raw_length_for(input_length, r, mu) == (fits - 1 if r == 0.5 and targets > inputs else fits)


def test_random_segmentation_is_uniform_over_compositions() -> None:
    gen = generator(0)
    for items, segments in [(1, 1), (10, 1), (10, 10), (57, 9)]:
        lengths = random_segmentation(items, segments, gen)
        assert lengths.shape == (segments,) and int(lengths.sum()) == items and (lengths > 0).all()
    # 5 items into 2 segments: (1,4) (2,3) (3,2) (4,1), each with probability 1/4
    n = 4000
    firsts = torch.stack([random_segmentation(5, 2, gen)[0] for _ in range(n)])
    for first in range(1, 5):
        assert abs(int((firsts == first).sum()) - n / 4) <= five_sigma(n, 1 / 4)


@pytest.mark.parametrize("r, mu", SETTINGS)
def test_noise_mask_has_exact_counts(r: float, mu: float) -> None:
    gen = generator(1)
    for length in (7, 100, 568):
        n, s, _, _ = span_lengths(length, r, mu)
        if s > length - n:
            continue
        for _ in range(20):
            noise = random_spans_noise_mask(length, r, mu, gen)
            assert int(noise.sum()) == n
            starts = noise & ~torch.cat([torch.tensor([False]), noise[:-1]])
            assert int(starts.sum()) == s
            assert not noise[0] and noise[-1]  # non-noise first, noise last


@pytest.mark.parametrize("r, mu", SETTINGS)
def test_encoder_decoder_batches_round_trip(shakespeare, r: float, mu: float) -> None:
    tokenizer = FakeTokenizer(1024, num_sentinels=100)
    special = tokenizer.special
    seq_len = 128
    span = build_objective(SpanConfig(noise_density=r, mean_span_length=mu), tokenizer, seq_len, "auto")
    n, s, input_len, target_len = span_lengths(span.window_length, r, mu)
    assert span.window_length == raw_length_for(seq_len, r, mu) and span.target_length == target_len
    for w, batch in batches(span, shakespeare.train, 8, 3):
        assert_int64(batch)
        assert batch.input_ids.shape == (8, seq_len) and batch.attention == "bidirectional"
        assert batch.labels.shape == batch.decoder_input_ids.shape == (8, target_len)
        assert (batch.decoder_input_ids[:, 0] == special.bos).all()
        assert torch.equal(batch.decoder_input_ids[:, 1:], batch.labels[:, :-1])
        for row in range(8):
            inputs = batch.input_ids[row, :input_len].tolist()
            assert (batch.input_ids[row, input_len:] == special.pad).all()
            targets = batch.labels[row].tolist()
            is_sentinel = lambda t: special.first_sentinel <= t < special.first_ordinary
            order = list(range(special.first_sentinel, special.first_sentinel + s))
            assert [t for t in inputs if is_sentinel(t)] == order
            assert [t for t in targets if is_sentinel(t)] == order
            assert targets[0] == special.sentinel(0) and targets[-1] == special.eos
            assert len(targets) - s - 1 == n
            assert uncorrupt_spans(inputs, targets, special) == w.tokens[row].tolist()


def test_the_corrupted_input_fills_the_model_input_exactly() -> None:
    span = build_objective(SpanConfig(), FakeTokenizer(1024, 100), 512, "auto")
    assert (span.window_length, span.input_len, span.target_length) == (568, 512, 114)


@pytest.mark.parametrize("r, mu", SETTINGS[:2])
def test_decoder_only_form(shakespeare, r: float, mu: float) -> None:
    tokenizer = FakeTokenizer(1024, num_sentinels=100)
    special = tokenizer.special
    seq_len = 128
    span = build_objective(SpanConfig(noise_density=r, mean_span_length=mu), tokenizer, seq_len, "decoder")
    n, s, input_len, target_len = span_lengths(span.window_length, r, mu)
    assert input_len + target_len - 1 <= seq_len < sum(span_lengths(span.window_length + 1, r, mu)[2:]) - 1
    for w, batch in batches(span, shakespeare.train, 8, 2):
        assert batch.attention == "prefix" and batch.input_ids.shape == batch.labels.shape == (8, seq_len)
        assert batch.decoder_input_ids is None and (batch.prefix_len == input_len).all()
        for row in range(8):
            ids, labels = batch.input_ids[row], batch.labels[row]
            carries = (labels != IGNORE).nonzero().flatten()
            # every target token is a label, the first predicted from the last input position; shifted once
            assert carries.tolist() == list(range(input_len - 1, input_len + target_len - 1))
            assert torch.equal(labels[carries[:-1]], ids[carries[:-1] + 1])
            # the input holds all but the final eos of the target, which is only a label
            inputs, targets = ids[:input_len].tolist(), labels[carries].tolist()
            assert targets[0] == special.sentinel(0) and targets[-1] == special.eos
            assert uncorrupt_spans(inputs, targets, special) == w.tokens[row].tolist()


def test_same_seed_same_batch(shakespeare) -> None:
    span = build_objective(SpanConfig(), shakespeare.tokenizer, 64, "auto")
    w = windows(shakespeare.train, span.window_length, 4, step=2)
    assert_same_batch(span.make_batch(w, generator(3, 2)), span.make_batch(w, generator(3, 2)))
    assert not torch.equal(span.make_batch(w, generator(3, 2)).labels, span.make_batch(w, generator(3, 1)).labels)
