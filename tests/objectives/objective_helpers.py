"""Shared helpers of the objective tests: small fakes, real-text windows and the 5-sigma bound."""

from __future__ import annotations

import math
from dataclasses import fields

import numpy as np
import torch

from lmpt.batch import IGNORE, Batch
from lmpt.data.corpus import TokenCorpus
from lmpt.data.sampler import StepLayout, Windows, WindowSampler
from lmpt.rng import generator
from lmpt.tokenizer.special import SpecialTokens


def five_sigma(n: int, p: float) -> float:
    """Five binomial standard deviations of a count of n trials with success probability p."""
    return 5 * math.sqrt(n * p * (1 - p))


class FakeTokenizer:
    """The part of Tokenizer an objective uses: reserved ids, vocabulary size, word starts."""

    def __init__(self, vocab_size: int = 200, num_sentinels: int = 8) -> None:
        self.special = SpecialTokens(num_sentinels=num_sentinels)
        self.vocab_size = vocab_size

    def word_starts(self) -> torch.Tensor:
        starts = torch.arange(self.vocab_size) % 3 == 0
        starts[: self.special.first_ordinary] = True
        return starts


def fake_corpus(docs: list[list[list[int]]], eos: int = 3) -> TokenCorpus:
    """A TokenCorpus of documents given as lists of sentences of token ids, each document followed by eos."""
    tokens, doc_offsets, sent_offsets, doc_sent_offsets = [], [0], [], [0]
    for doc in docs:
        for sentence in doc:
            sent_offsets.append(len(tokens))
            tokens.extend(sentence)
        tokens.append(eos)
        doc_offsets.append(len(tokens))
        doc_sent_offsets.append(len(sent_offsets))
    sent_offsets.append(len(tokens))
    i64 = lambda xs: np.asarray(xs, dtype=np.int64)
    return TokenCorpus(i64(tokens), i64(doc_offsets), i64(sent_offsets), i64(doc_sent_offsets), eos_id=eos)


def windows(corpus: TokenCorpus, window_length: int, batch_size: int, step: int, seed: int = 0) -> Windows:
    """The sampler's windows of `step`."""
    return WindowSampler(corpus, window_length, StepLayout(batch_size), seed).windows(step)


def batches(objective, corpus: TokenCorpus, batch_size: int, n_steps: int, seed: int = 0):
    """(windows, batch) of steps 0..n_steps-1, each corrupted with generator(seed, step)."""
    sampler = WindowSampler(corpus, objective.window_length, StepLayout(batch_size), seed)
    for step in range(n_steps):
        w = sampler.windows(step)
        yield w, objective.make_batch(w, generator(seed, "objective", step))


def assert_same_batch(a: Batch, b: Batch) -> None:
    """Bit-for-bit equality of every field."""
    for f in fields(Batch):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, torch.Tensor):
            assert x.dtype == y.dtype and torch.equal(x, y), f.name
        else:
            assert x == y, f.name


def assert_int64(batch: Batch) -> None:
    for f in fields(Batch):
        value = getattr(batch, f.name)
        if isinstance(value, torch.Tensor):
            assert value.dtype == torch.long, f.name


def uncorrupt_spans(inputs: list[int], targets: list[int], special: SpecialTokens) -> list[int]:
    """Replace each sentinel of `inputs` by the target tokens that follow it in `targets` (final eos of
    both dropped): the original window if the corruption is right."""
    assert inputs[-1] == special.eos and targets[-1] == special.eos
    first, last = special.first_sentinel, special.first_ordinary
    spans: dict[int, list[int]] = {}
    current = None
    for token in targets[:-1]:
        if first <= token < last:
            current = token
            assert current not in spans, "sentinel repeated in the target"
            spans[current] = []
        else:
            assert current is not None, "target does not start with a sentinel"
            spans[current].append(token)
    out: list[int] = []
    for token in inputs[:-1]:
        out.extend(spans.pop(token) if first <= token < last else [token])
    assert not spans, "target spans without a sentinel in the input"
    return out


def loss_positions(labels: torch.Tensor) -> torch.Tensor:
    return labels != IGNORE


def occurrences(tokens: np.ndarray, needle: list[int]) -> np.ndarray:
    """Offsets where `needle` occurs in `tokens`."""
    found = np.flatnonzero(tokens[: len(tokens) - len(needle) + 1] == needle[0])
    for k, token in enumerate(needle[1:], start=1):
        found = found[tokens[found + k] == token]
    return found


def batch_pairs(nsp, w: Windows, batch: Batch):
    """(document of the window start, A, B, label) of every row of `batch`, with the mlm corruption undone."""
    special = nsp.special
    batch_size, seq_len = batch.input_ids.shape
    assert_int64(batch)
    assert batch.labels.shape == batch.segment_ids.shape == (batch_size, seq_len)
    original = torch.where(batch.labels != IGNORE, batch.labels, batch.input_ids)
    for row in range(batch_size):
        ids = original[row].tolist()
        seps = [i for i, t in enumerate(ids) if t == special.sep]
        assert ids[0] == special.cls and len(seps) == 2
        first, second = seps
        assert all(t == special.pad for t in ids[second + 1 :])
        expected = [0] * (first + 1) + [1] * (second - first) + [0] * (seq_len - second - 1)
        assert batch.segment_ids[row].tolist() == expected
        special_positions = torch.tensor([t < special.first_ordinary for t in ids])
        assert (batch.labels[row][special_positions] == IGNORE).all()  # mlm only on the pair's tokens
        yield (
            w.corpus.doc_of(int(w.starts[row])),
            ids[1:first],
            ids[first + 1 : second],
            int(batch.sequence_labels[row]),
        )


def pairs(nsp, corpus, n_steps: int, batch_size: int = 32):
    """`batch_pairs` of the sampler's batches of steps 0..n_steps-1."""
    for w, batch in batches(nsp, corpus, batch_size, n_steps):
        yield from batch_pairs(nsp, w, batch)
