"""nsp / sop as BERT's create_pretraining_data builds them: never an empty segment, and short sequences at
`short_seq_prob` (issue 13, points 1 and 5)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from objective_helpers import FakeTokenizer, batch_pairs, batches, fake_corpus, five_sigma, occurrences, pairs

from lmpt.data.corpus import TokenCorpus
from lmpt.data.sampler import gather_windows
from lmpt.errors import LmptError
from lmpt.objectives.nsp import NspConfig
from lmpt.objectives.registry import build_objective
from lmpt.rng import generator

SEQ_LEN = 64
BUDGET = SEQ_LEN - 3  # [CLS] A [SEP] B [SEP]


def document_sentences(corpus: TokenCorpus, doc: int) -> list[list[int]]:
    """Document `doc` of `corpus` as lists of sentence tokens."""
    start, end = corpus.doc_span(doc)
    bounds = [*(int(s) for s in corpus.sentence_starts(doc) if start <= s < end), end]
    return [corpus.window(a, b - a).tolist() for a, b in zip(bounds[:-1], bounds[1:], strict=True) if b > a]


def with_one_token_documents(corpus: TokenCorpus, n_docs: int) -> TokenCorpus:
    """The first `n_docs` real documents, each followed by a document of a single one-token sentence (what
    data.documents=line makes of a one-word line): half the documents are like that."""
    docs = []
    for d in range(n_docs):
        sentences = document_sentences(corpus, d)
        docs += [sentences, [[sentences[0][0]]]]
    return fake_corpus(docs, eos=corpus.eos_id)


def follows(tokens: np.ndarray, corpus: TokenCorpus, first: list[int], then: list[int]) -> bool:
    """`then` occurs after `first` in one document of `corpus` (each side may have been trimmed at either end)."""
    first_at, then_at = occurrences(tokens, first), occurrences(tokens, then)
    first_docs, then_docs = corpus.docs_of(first_at), corpus.docs_of(then_at)
    return any(
        ((then_docs == d) & (then_at >= at + len(first))).any() for d, at in zip(first_docs, first_at, strict=True)
    )


@pytest.mark.parametrize("variant", ["nsp", "sop"])
def test_no_segment_is_empty_where_half_the_documents_are_one_token(shakespeare, variant: str) -> None:
    corpus = with_one_token_documents(shakespeare.train, 400)
    tokens = np.asarray(corpus.window(0, corpus.n_tokens))
    nsp = build_objective(NspConfig(variant=variant), shakespeare.tokenizer, SEQ_LEN, "auto")
    nsp.check_corpus(corpus, "the training text")
    examples = list(pairs(nsp, corpus, 25))  # the sampler's windows: 800 pairs
    one_token_docs = np.arange(1, corpus.n_docs, 2)
    starts = np.asarray([corpus.doc_span(int(d))[0] for d in one_token_docs])  # windows that start in one
    starts = starts[starts + nsp.window_length <= corpus.n_tokens]
    w = gather_windows(corpus, starts, nsp.window_length)
    examples += list(batch_pairs(nsp, w, nsp.make_batch(w, generator(0, "one-token"))))
    empty = sum(1 for _, a, b, _ in examples if not a or not b)
    assert empty == 0, f"{empty} of {len(examples)} pairs have an empty segment"
    labels = [label for *_, label in examples]
    n = len(labels)
    assert abs(sum(labels) - 0.5 * n) <= five_sigma(n, 0.5)
    for _, a, b, label in examples:
        assert len(a) + len(b) <= BUDGET
        if variant == "sop" or label == 0:  # both segments from one document, in order (sop: swapped if 1)
            first, then = (b, a) if label == 1 else (a, b)
            assert follows(tokens, corpus, first, then), (a, b, label)


def test_a_text_without_a_two_token_document_is_refused() -> None:
    corpus = fake_corpus([[[20]], [[21]], [[22]]])  # three one-token documents
    for variant in ("nsp", "sop"):
        nsp = build_objective(NspConfig(variant=variant), FakeTokenizer(), 16, "auto")
        with pytest.raises(LmptError, match=f"{variant} cuts both segments .* no document of the validation text"):
            nsp.check_corpus(corpus, "the validation text")


def pair_lengths(nsp, corpus: TokenCorpus, n_steps: int) -> torch.Tensor:
    """Tokens of A plus B in each pair of the sampler's batches of steps 0..n_steps-1."""
    lengths = [(batch.input_ids != nsp.special.pad).sum(dim=1) - 3 for _, batch in batches(nsp, corpus, 64, n_steps)]
    return torch.cat(lengths)


@pytest.mark.parametrize("variant", ["nsp", "sop"])
def test_short_sequences_come_at_short_seq_prob(wikitext, variant: str) -> None:
    """BERT draws a shorter target length, uniform on [2, budget], for short_seq_prob of its pairs."""
    corpus = wikitext.train
    default = build_objective(NspConfig(variant=variant), wikitext.tokenizer, SEQ_LEN, "auto")
    assert default.cfg.short_seq_prob == 0.1
    lengths = pair_lengths(default, corpus, 30)
    never = build_objective(NspConfig(variant=variant, short_seq_prob=0.0), wikitext.tokenizer, SEQ_LEN, "auto")
    off = pair_lengths(never, corpus, 30)
    half = BUDGET // 2
    assert int((off < half).sum()) == 0  # wikitext's articles are long: without short sequences none is under half
    assert int(lengths.min()) >= 2
    n = lengths.numel()
    # under half the window only by a short draw: a target length in [2, half - 1]
    p = 0.1 * (half - 2) / (BUDGET - 1)
    assert abs(int((lengths < half).sum()) - n * p) <= five_sigma(n, p)
    # short of the full window: a short draw below BUDGET, or a pair the document's end cut short (as with 0)
    natural = float((off < BUDGET).float().mean())
    p_short = 0.1 * (BUDGET - 2) / (BUDGET - 1)
    p = p_short + (1 - p_short) * natural
    assert abs(int((lengths < BUDGET).sum()) - n * p) <= five_sigma(n, p)


def test_short_seq_prob_is_checked() -> None:
    with pytest.raises(LmptError, match=r"objective.short_seq_prob=1.5 must be in \[0, 1\]"):
        build_objective(NspConfig(short_seq_prob=1.5), FakeTokenizer(), 16, "auto")
