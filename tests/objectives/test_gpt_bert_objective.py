"""gpt-bert held to GPT-BERT's reference (Charpentier & Samuel 2024, ltgoslo/gpt-bert): 1 causal batch to 15
masked, a masking rate from 0.3 down to 0.15, each masked token predicted at the position before it, causal
batches plain clm."""

from __future__ import annotations

import pytest
import torch
from objective_helpers import assert_same_batch, five_sigma, windows

from lmpt.batch import IGNORE
from lmpt.errors import LmptError
from lmpt.objectives.clm import ClmConfig
from lmpt.objectives.gpt_bert import GptBertConfig
from lmpt.objectives.registry import build_objective
from lmpt.rng import generator

SEQ_LEN, MAX_STEPS = 64, 1000


def objective(tokenizer, **settings):
    made = build_objective(GptBertConfig(**settings), tokenizer, SEQ_LEN, "auto")
    made.plan_run(MAX_STEPS)
    return made


def test_the_reference_defaults() -> None:
    cfg = GptBertConfig()
    assert cfg.causal_ratio == pytest.approx(1 / 16)  # hybrid_numerator 15 / hybrid_denominator 16 masked
    assert (cfg.mask_prob_schedule, cfg.mask_prob_start, cfg.mask_prob) == ("linear", 0.3, 0.15)
    assert (cfg.mask_token_frac, cfg.random_token_frac) == (0.8, 0.1)


@pytest.mark.parametrize("ratio", [1 / 16, 0.5])
def test_share_of_causal_batches_is_the_ratio(shakespeare, ratio: float) -> None:
    gpt_bert = objective(shakespeare.tokenizer, causal_ratio=ratio)
    w = windows(shakespeare.train, gpt_bert.window_length, 1, 0)
    n = 3000
    causal = sum(
        gpt_bert.batch_at(w, generator(0, "objective", step, micro, 0), step).attention == "causal"
        for step in range(n // 2)
        for micro in range(2)
    )
    assert abs(causal - n * ratio) < five_sigma(n, ratio), causal / n


def masked_batches(gpt_bert, corpus, step: int, n: int = 12):
    """(windows, batch) of the masked batches among n micro-steps of `step`."""
    for micro in range(n):
        w = windows(corpus, gpt_bert.window_length, 16, step * n + micro)
        batch = gpt_bert.batch_at(w, generator(0, "objective", step, micro, 0), step)
        if batch.attention != "causal":
            yield w, batch


def test_masked_tokens_are_predicted_at_the_position_before(shakespeare) -> None:
    gpt_bert = objective(shakespeare.tokenizer)
    special = gpt_bert.special
    for w, batch in masked_batches(gpt_bert, shakespeare.train, 0):
        assert batch.attention == "bidirectional"
        tokens, inputs, labels = w.tokens, batch.input_ids, batch.labels
        assert inputs.shape == labels.shape == (16, SEQ_LEN)
        selected = labels != IGNORE  # selected[:, t]: token t+1 was masked and is predicted at t
        assert torch.equal(labels[selected], tokens[:, 1:][selected])
        assert torch.equal(inputs[:, 0], tokens[:, 0])  # the first token is never masked: nothing predicts it
        shown = inputs[:, 1:]  # input t+1 against its label at t
        untouched = ~selected[:, :-1]
        assert torch.equal(shown[untouched], tokens[:, 1:-1][untouched])
        assert (shown[selected[:, :-1]] == special.mask).float().mean() > 0.6  # about 80% [MASK]
        assert not (tokens[:, 1:][selected] < special.first_ordinary).any()  # reserved ids are never selected


@pytest.mark.parametrize("step,rate", [(0, 0.30), (MAX_STEPS // 2, 0.225), (MAX_STEPS, 0.15)])
def test_masking_rate_moves_from_030_to_015(shakespeare, step: int, rate: float) -> None:
    gpt_bert = objective(shakespeare.tokenizer, causal_ratio=0.0)
    selected = eligible = 0
    for w, batch in masked_batches(gpt_bert, shakespeare.train, step):
        selected += int((batch.labels != IGNORE).sum())
        eligible += int((w.tokens[:, 1:] >= gpt_bert.special.first_ordinary).sum())
    assert abs(selected - rate * eligible) < five_sigma(eligible, rate), selected / eligible


def test_causal_batches_are_plain_clm(shakespeare) -> None:
    gpt_bert = objective(shakespeare.tokenizer, causal_ratio=1.0)
    clm = build_objective(ClmConfig(), shakespeare.tokenizer, SEQ_LEN, "auto")
    w = windows(shakespeare.train, gpt_bert.window_length, 8, 5)
    batch = gpt_bert.batch_at(w, generator(0, "objective", 5, 0, 0), 5)
    assert_same_batch(batch, clm.make_batch(w, generator(0, "objective", 5, 0, 0)))


def test_a_batch_is_a_function_of_the_step(shakespeare) -> None:
    first, again = objective(shakespeare.tokenizer), objective(shakespeare.tokenizer)
    w = windows(shakespeare.train, first.window_length, 4, 9)
    for step in (0, 17, 400):
        gen = lambda step=step: generator(3, "objective", step, 1, 0)
        assert_same_batch(first.batch_at(w, gen(), step), again.batch_at(w, gen(), step))


def test_architecture_mean_loss_share_and_refusals(shakespeare) -> None:
    gpt_bert = objective(shakespeare.tokenizer)
    assert gpt_bert.arch == "decoder" and gpt_bert.expected_loss_fraction == pytest.approx(1 / 16 + 15 / 16 * 0.225)
    with pytest.raises(LmptError, match=r"objective.causal_ratio=2 must be in \[0, 1\]"):
        build_objective(GptBertConfig(causal_ratio=2.0), shakespeare.tokenizer, SEQ_LEN, "auto")
    with pytest.raises(LmptError, match="objective gpt-bert cannot train an encoder"):
        build_objective(GptBertConfig(), shakespeare.tokenizer, SEQ_LEN, "encoder")
