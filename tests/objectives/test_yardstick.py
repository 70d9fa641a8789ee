"""The fixed yardstick: runs that differ in masking settings score the same masked positions of the same
held-out windows, at eval_mask_prob, every selected token replaced by [MASK]."""

from __future__ import annotations

import pytest
import torch
from objective_helpers import assert_same_batch, five_sigma

from lmpt.batch import IGNORE
from lmpt.data.sampler import ValidationWindows
from lmpt.errors import LmptError
from lmpt.objectives.clm import ClmConfig
from lmpt.objectives.mlm import MlmConfig
from lmpt.objectives.nsp import NspConfig
from lmpt.objectives.registry import build_objective
from lmpt.train.batches import validation_batches, yardstick_batches

SEQ_LEN = 64
N_BATCHES = 6


def held_out(data, objective) -> dict[str, ValidationWindows]:
    return {"": ValidationWindows(data.val, objective.window_length, 8, N_BATCHES)}


@pytest.mark.parametrize(
    "config",
    [MlmConfig, NspConfig],
)
def test_runs_differing_only_in_mask_prob_score_identical_positions(wikitext, config) -> None:
    low = build_objective(config(mask_prob=0.05), wikitext.tokenizer, SEQ_LEN, "auto")
    high = build_objective(config(mask_prob=0.4), wikitext.tokenizer, SEQ_LEN, "auto")
    fixed_low = yardstick_batches(held_out(wikitext, low), low, N_BATCHES)
    fixed_high = yardstick_batches(held_out(wikitext, high), high, N_BATCHES)
    assert len(fixed_low) == N_BATCHES
    for a, b in zip(fixed_low, fixed_high, strict=True):
        assert_same_batch(a, b)  # same windows, same masked positions, same inputs
    # while each run's own validation batches are masked at its own rate
    own_low = validation_batches(held_out(wikitext, low), low, 1337, N_BATCHES)
    own_high = validation_batches(held_out(wikitext, high), high, 1337, N_BATCHES)
    count = lambda batches: sum(int((b.labels != IGNORE).sum()) for b in batches)
    assert count(own_low[""]) < count(fixed_low) < count(own_high[""])


def test_the_yardstick_ignores_replacement_fractions_and_whole_words(wikitext) -> None:
    plain = build_objective(MlmConfig(), wikitext.tokenizer, SEQ_LEN, "auto")
    other = MlmConfig(mask_prob=0.3, mask_token_frac=0.5, random_token_frac=0.3, whole_word=True)
    varied = build_objective(other, wikitext.tokenizer, SEQ_LEN, "auto")
    for a, b in zip(
        yardstick_batches(held_out(wikitext, plain), plain, N_BATCHES),
        yardstick_batches(held_out(wikitext, varied), varied, N_BATCHES),
        strict=True,
    ):
        assert_same_batch(a, b)


@pytest.mark.parametrize("rate", [0.15, 0.3])
def test_masks_eval_mask_prob_of_the_tokens_all_as_mask(wikitext, rate: float) -> None:
    mlm = build_objective(MlmConfig(eval_mask_prob=rate), wikitext.tokenizer, SEQ_LEN, "auto")
    windows = held_out(wikitext, mlm)[""]
    batches = yardstick_batches({"": windows}, mlm, N_BATCHES)
    tokens = torch.cat([windows.batch(i).tokens for i in range(N_BATCHES)])
    inputs = torch.cat([b.input_ids for b in batches])
    labels = torch.cat([b.labels for b in batches])
    selected = labels != IGNORE
    eligible = int((tokens >= wikitext.tokenizer.special.first_ordinary).sum())
    assert abs(int(selected.sum()) - rate * eligible) < five_sigma(eligible, rate)
    assert torch.equal(labels[selected], tokens[selected])
    assert bool((inputs[selected] == wikitext.tokenizer.special.mask).all())
    assert torch.equal(inputs[~selected], tokens[~selected])


def test_objectives_without_masking_have_no_yardstick(wikitext) -> None:
    clm = build_objective(ClmConfig(), wikitext.tokenizer, SEQ_LEN, "auto")
    assert yardstick_batches(held_out(wikitext, clm), clm, N_BATCHES) == []


def test_eval_mask_prob_out_of_range_is_refused(wikitext) -> None:
    with pytest.raises(LmptError, match=r"objective.eval_mask_prob=1.5 must be in \(0, 1\)"):
        build_objective(MlmConfig(eval_mask_prob=1.5), wikitext.tokenizer, SEQ_LEN, "auto")
