"""Shared helpers of the objective tests: small fakes, real-text windows and the 5-sigma bound."""

from __future__ import annotations

import math
from dataclasses import fields

import numpy as np
import torch

from lmpt.batch import IGNORE, Batch, Windows
from lmpt.data.corpus import TokenCorpus
from lmpt.data.sampler import WindowSampler
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
    return WindowSampler(corpus, window_length, batch_size, seed).windows(step)


def batches(objective, corpus: TokenCorpus, batch_size: int, n_steps: int, seed: int = 0):
    """(windows, batch) of steps 0..n_steps-1, each corrupted with generator(seed, step)."""
    sampler = WindowSampler(corpus, objective.window_length, batch_size, seed)
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
