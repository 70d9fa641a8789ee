"""mlm: BERT selection and replacement held to their binomial rates on real text."""

from __future__ import annotations

import pytest
import torch
from objective_helpers import FakeTokenizer, assert_int64, assert_same_batch, batches, five_sigma, windows

from lmpt.batch import IGNORE
from lmpt.data.sampler import Windows
from lmpt.objectives.masking import mask_tokens
from lmpt.objectives.mlm import MlmConfig
from lmpt.objectives.registry import build_objective
from lmpt.rng import generator

SEQ_LEN = 128


def collect(mlm, corpus, n_steps: int = 24, batch_size: int = 16) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(original tokens, inputs, labels) of several batches, flattened."""
    tokens, inputs, labels = [], [], []
    for w, batch in batches(mlm, corpus, batch_size, n_steps):
        assert batch.attention == "bidirectional"
        assert batch.input_ids.shape == batch.labels.shape == (batch_size, SEQ_LEN)
        assert_int64(batch)
        tokens.append(w.tokens.flatten())
        inputs.append(batch.input_ids.flatten())
        labels.append(batch.labels.flatten())
    return torch.cat(tokens), torch.cat(inputs), torch.cat(labels)


@pytest.mark.parametrize("mask_prob", [0.05, 0.15, 0.4])
def test_selection_and_replacement_rates(shakespeare, mask_prob: float) -> None:
    tokenizer = shakespeare.tokenizer
    special = tokenizer.special
    mlm = build_objective(MlmConfig(mask_prob=mask_prob), tokenizer, SEQ_LEN, "auto")
    tokens, inputs, labels = collect(mlm, shakespeare.train)
    eligible = tokens >= special.first_ordinary
    selected = labels != IGNORE

    # labels: the original token exactly at the selected positions, which are all eligible
    assert torch.equal(labels[selected], tokens[selected])
    assert not (selected & ~eligible).any()
    # unselected tokens untouched; every changed token is selected
    assert torch.equal(inputs[~selected], tokens[~selected])
    assert not ((inputs != tokens) & ~selected).any()

    n = int(eligible.sum())
    assert abs(int(selected.sum()) - mask_prob * n) <= five_sigma(n, mask_prob)

    k = int(selected.sum())
    masked = inputs[selected] == special.mask
    unchanged = inputs[selected] == tokens[selected]
    other = ~masked & ~unchanged
    n_ordinary = tokenizer.vocab_size - special.first_ordinary
    p_unchanged = 0.1 + 0.1 / n_ordinary
    assert abs(int(masked.sum()) - 0.8 * k) <= five_sigma(k, 0.8)
    assert abs(int(unchanged.sum()) - p_unchanged * k) <= five_sigma(k, p_unchanged)
    assert abs(int(other.sum()) - (0.1 - 0.1 / n_ordinary) * k) <= five_sigma(k, 0.1 - 0.1 / n_ordinary)
    # random replacements are ordinary ids, never reserved ones
    replacements = inputs[selected][other]
    assert (replacements >= special.first_ordinary).all() and (replacements < tokenizer.vocab_size).all()


def test_fractions_are_configurable(shakespeare) -> None:
    special = shakespeare.tokenizer.special
    cfg = MlmConfig(mask_prob=0.3, mask_token_frac=0.0, random_token_frac=1.0)
    tokens, inputs, labels = collect(build_objective(cfg, shakespeare.tokenizer, SEQ_LEN, "auto"), shakespeare.train, 4)
    selected = labels != IGNORE
    assert not (inputs == special.mask).any()
    assert (inputs[selected] >= special.first_ordinary).all()
    cfg = MlmConfig(mask_prob=0.3, mask_token_frac=1.0, random_token_frac=0.0)
    tokens, inputs, labels = collect(build_objective(cfg, shakespeare.tokenizer, SEQ_LEN, "auto"), shakespeare.train, 4)
    assert (inputs[labels != IGNORE] == special.mask).all()


def test_padding_and_reserved_ids_are_never_selected() -> None:
    tok = FakeTokenizer()
    special = tok.special
    tokens = torch.randint(0, tok.vocab_size, (64, 50), generator=generator(0))
    tokens[:, 40:] = special.pad
    inputs, labels = mask_tokens(
        tokens, generator(1), special=special, vocab_size=tok.vocab_size, mask_prob=0.9, random_token_frac=0.2
    )
    reserved = tokens < special.first_ordinary
    assert reserved.any() and (labels[reserved] == IGNORE).all()
    assert torch.equal(inputs[reserved], tokens[reserved])
    assert (labels[:, :40][~reserved[:, :40]] != IGNORE).float().mean() > 0.8


def test_whole_word_masking_takes_all_pieces_of_a_word_or_none(shakespeare) -> None:
    tokenizer = shakespeare.tokenizer
    starts_of = tokenizer.word_starts()
    mlm = build_objective(MlmConfig(whole_word=True), tokenizer, SEQ_LEN, "auto")
    n_words = n_selected = multi_piece = 0
    for w, batch in batches(mlm, shakespeare.train, 16, 16):
        starts = starts_of[w.tokens]
        starts[:, 0] = True
        word = torch.cumsum(starts.long(), dim=1)
        selected = batch.labels != IGNORE
        eligible = w.tokens >= tokenizer.special.first_ordinary
        for row in range(w.tokens.shape[0]):
            for index in torch.unique(word[row]).tolist():
                in_word = (word[row] == index) & eligible[row]
                if not in_word.any():
                    continue
                chosen = selected[row][in_word]
                assert chosen.all() or not chosen.any()
                n_words += 1
                n_selected += int(chosen.all())
                multi_piece += int(chosen.all() and int(in_word.sum()) > 1)
    assert abs(n_selected - 0.15 * n_words) <= five_sigma(n_words, 0.15)
    assert multi_piece > 0


def test_same_seed_same_batch(shakespeare) -> None:
    mlm = build_objective(MlmConfig(whole_word=True), shakespeare.tokenizer, SEQ_LEN, "auto")
    w = windows(shakespeare.train, SEQ_LEN, 8, step=5)
    assert_same_batch(mlm.make_batch(w, generator(7, 5)), mlm.make_batch(w, generator(7, 5)))
    assert not torch.equal(mlm.make_batch(w, generator(7, 5)).labels, mlm.make_batch(w, generator(7, 6)).labels)


def test_windows_are_not_modified_in_place(shakespeare) -> None:
    mlm = build_objective(MlmConfig(), shakespeare.tokenizer, SEQ_LEN, "auto")
    w = windows(shakespeare.train, SEQ_LEN, 4, step=0)
    before = w.tokens.clone()
    mlm.make_batch(Windows(w.tokens, w.starts, w.corpus), generator(0))
    assert torch.equal(w.tokens, before)
