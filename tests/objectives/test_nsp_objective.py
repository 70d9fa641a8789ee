"""nsp / sop: pair layout, label balance, where A and B come from, the refusal of a one-document text."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from objective_helpers import (
    FakeTokenizer,
    assert_same_batch,
    fake_corpus,
    five_sigma,
    occurrences,
    pairs,
    windows,
)

from lmpt.batch import IGNORE, Batch
from lmpt.errors import LmptError
from lmpt.model.output import ModelOutput
from lmpt.objectives.nsp import NspConfig, truncate_pair
from lmpt.objectives.registry import build_objective
from lmpt.rng import generator

SEQ_LEN = 64


@pytest.mark.parametrize("text", ["shakespeare", "wikitext"])
def test_nsp_pairs(request, text: str) -> None:
    data = request.getfixturevalue(text)
    corpus = data.train
    tokens = np.asarray(corpus.window(0, corpus.n_tokens))
    nsp = build_objective(NspConfig(), data.tokenizer, SEQ_LEN, "auto")
    nsp.check_corpus(corpus, "the training text")
    labels = []
    for doc, a, b, label in pairs(nsp, corpus, 8):
        labels.append(label)
        assert a and b and len(a) + len(b) <= SEQ_LEN - 3
        start, end = corpus.doc_span(doc)
        a_at = occurrences(tokens[start:end], a)
        assert len(a_at), "A is a run of consecutive tokens of the window's document"
        b_at = occurrences(tokens, b)
        b_docs = corpus.docs_of(b_at)
        b_fits = b_at + len(b) <= np.asarray([corpus.doc_span(d)[1] for d in b_docs])  # never crosses an eos
        if label == 0:  # B follows A in the same document
            assert any(((b_docs == doc) & b_fits & (b_at - start >= a_at.min() + len(a))).tolist())
        else:  # B is from another document
            assert any(((b_docs != doc) & b_fits).tolist())
    n = len(labels)
    assert abs(sum(labels) - 0.5 * n) <= five_sigma(n, 0.5)


def test_sop_pairs(shakespeare) -> None:
    corpus = shakespeare.train
    nsp = build_objective(NspConfig(variant="sop", random_pair_prob=0.3), shakespeare.tokenizer, SEQ_LEN, "auto")
    labels = []
    for doc, a, b, label in pairs(nsp, corpus, 6):
        labels.append(label)
        start, end = corpus.doc_span(doc)
        text = np.asarray(corpus.window(start, end - start))
        first, then = (b, a) if label == 1 else (a, b)
        first_at, then_at = occurrences(text, first), occurrences(text, then)
        assert len(first_at) and len(then_at) and then_at.max() >= first_at.min() + len(first)
    n = len(labels)
    assert abs(sum(labels) - 0.3 * n) <= five_sigma(n, 0.3)


def test_truncation_trims_the_longer_side() -> None:
    a, b = torch.arange(10), torch.arange(100, 104)
    ta, tb = truncate_pair(a, b, 8, generator(0))
    assert (ta.numel(), tb.numel()) == (4, 4) and torch.equal(tb, b)
    assert ta.tolist() == list(range(int(ta[0]), int(ta[0]) + 4))  # a contiguous run of a
    ta, tb = truncate_pair(torch.arange(5), torch.arange(5), 7, generator(0))
    assert (ta.numel(), tb.numel()) == (4, 3)  # a tie trims B
    ta, tb = truncate_pair(a, b, 20, generator(0))
    assert torch.equal(ta, a) and torch.equal(tb, b)


def test_one_document_is_refused_for_nsp_but_not_sop() -> None:
    tokenizer = FakeTokenizer()
    corpus = fake_corpus([[[20, 21, 22], [23, 24]]])
    nsp = build_objective(NspConfig(), tokenizer, 16, "auto")
    with pytest.raises(LmptError, match="nsp needs at least two documents; the training text has 1: .*data.documents"):
        nsp.check_corpus(corpus, "the training text")
    build_objective(NspConfig(variant="sop"), tokenizer, 16, "auto").check_corpus(corpus, "the training text")


def test_random_b_never_comes_from_the_same_document() -> None:
    tokenizer = FakeTokenizer()
    docs = [[[20 + 10 * d + s] * 3 for s in range(3)] for d in range(3)]  # doc d holds only ids 20+10d ..
    corpus = fake_corpus(docs)
    nsp = build_objective(NspConfig(random_pair_prob=1.0, mask_prob=0.01), tokenizer, 16, "auto")
    for step in range(20):
        w = windows(corpus, nsp.window_length, 4, step)
        batch = nsp.make_batch(w, generator(step))
        original = torch.where(batch.labels != IGNORE, batch.labels, batch.input_ids)
        for row in range(4):
            doc = corpus.doc_of(int(w.starts[row]))
            b_tokens = original[row][batch.segment_ids[row] == 1][:-1]
            assert ((b_tokens - 20) // 10 != doc).all() and batch.sequence_labels[row] == 1


def test_loss_joins_mlm_and_the_pair_head() -> None:
    nsp = build_objective(NspConfig(mlm_weight=0.5), FakeTokenizer(), 16, "auto")
    logits = torch.tensor([[2.0, 0.0], [0.0, 1.0], [1.0, 3.0]])
    targets = torch.tensor([0, 0, 1])
    batch = Batch(input_ids=torch.zeros(3, 16), labels=torch.zeros(3, 16), sequence_labels=targets)
    out = ModelOutput(torch.tensor([1.0, 3.0]), torch.tensor([True, False]), torch.tensor([0, 2]), logits)
    total, stats = nsp.loss(out, batch)
    pair = F.cross_entropy(logits, targets)
    assert total.item() == pytest.approx(0.5 * 2.0 + pair.item())
    assert stats["nsp_acc"][0].item() == 2 and stats["nsp_acc"][1].item() == 3
    assert stats["mlm_loss"][0].item() == 4.0 and stats["acc"][0].item() == 1
    assert stats["nsp_loss"][0].item() == pytest.approx(3 * pair.item())
    assert stats["loss"][0].item() == pytest.approx(total.item())
    assert nsp.perplexity_of == "mlm_loss"  # the token-level part: its exp is a perplexity


def test_same_seed_same_batch(shakespeare) -> None:
    nsp = build_objective(NspConfig(whole_word=True), shakespeare.tokenizer, SEQ_LEN, "auto")
    w = windows(shakespeare.train, nsp.window_length, 8, step=7)
    assert_same_batch(nsp.make_batch(w, generator(4, 7)), nsp.make_batch(w, generator(4, 7)))
    assert nsp.n_segments == 2 and nsp.n_sequence_classes == 2
