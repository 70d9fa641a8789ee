"""clm: inputs and labels are the window shifted against each other exactly once; document ids."""

from __future__ import annotations

import numpy as np
import torch
from objective_helpers import FakeTokenizer, assert_int64, assert_same_batch, batches, windows

from lmpt.batch import IGNORE
from lmpt.data.sampler import Windows
from lmpt.objectives.clm import ClmConfig, document_ids
from lmpt.objectives.registry import build_objective
from lmpt.rng import generator

SEQ_LEN = 64


def test_labels_are_the_inputs_shifted_exactly_once(shakespeare) -> None:
    clm = build_objective(ClmConfig(), shakespeare.tokenizer, SEQ_LEN, "auto")
    assert clm.window_length == SEQ_LEN + 1
    for w, batch in batches(clm, shakespeare.train, batch_size=8, n_steps=4):
        assert batch.input_ids.shape == batch.labels.shape == (8, SEQ_LEN)
        assert torch.equal(batch.input_ids, w.tokens[:, :-1])
        assert torch.equal(batch.labels, w.tokens[:, 1:])
        # the label of t is the input at t+1: a double (or missing) shift breaks this on real text
        assert torch.equal(batch.labels[:, :-1], batch.input_ids[:, 1:])
        assert not torch.equal(batch.labels, batch.input_ids)
        assert batch.attention == "causal" and batch.document_ids is None
        assert_int64(batch)


def test_document_ids_follow_the_corpus_documents(shakespeare) -> None:
    clm = build_objective(ClmConfig(document_attention=True), shakespeare.tokenizer, SEQ_LEN, "auto")
    corpus = shakespeare.train
    eos = shakespeare.tokenizer.special.eos
    crossed = 0
    for w, batch in batches(clm, corpus, batch_size=8, n_steps=8):
        offsets = w.starts[:, None].numpy() + np.arange(SEQ_LEN)[None]
        docs = corpus.docs_of(offsets)
        assert torch.equal(batch.document_ids, torch.from_numpy(docs - docs[:, :1]))
        crossed += int((batch.input_ids == eos).sum())
    assert crossed > 0  # the windows did pack several documents


def test_a_new_document_starts_right_after_each_eos() -> None:
    ids = torch.tensor([[7, 3, 8, 9, 3, 3, 5], [3, 4, 4, 4, 4, 4, 4]])
    assert document_ids(ids, eos=3).tolist() == [[0, 0, 1, 1, 1, 2, 3], [0, 1, 1, 1, 1, 1, 1]]


def test_padding_never_carries_loss() -> None:
    clm = build_objective(ClmConfig(), FakeTokenizer(), 4, "auto")
    tokens = torch.tensor([[20, 21, 22, 0, 0]])
    batch = clm.make_batch(Windows(tokens, torch.zeros(1, dtype=torch.long), None), generator(0))
    assert batch.labels.tolist() == [[21, 22, IGNORE, IGNORE]]


def test_same_seed_same_batch(shakespeare) -> None:
    clm = build_objective(ClmConfig(document_attention=True), shakespeare.tokenizer, SEQ_LEN, "auto")
    w = windows(shakespeare.train, clm.window_length, 4, step=3)
    assert_same_batch(clm.make_batch(w, generator(1, 3)), clm.make_batch(w, generator(2, 9)))
