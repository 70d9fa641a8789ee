"""mlm's masking-rate schedule: the selected share at each step follows the schedule's rate, a function of the step
(Ankner et al. 2023 decay mlm's rate linearly from 30% to 15%; GPT-BERT's code does the same)."""

from __future__ import annotations

import math

import pytest
import torch
from objective_helpers import assert_same_batch, five_sigma, windows

from lmpt.batch import IGNORE
from lmpt.errors import LmptError
from lmpt.objectives.mlm import MlmConfig, scheduled_rate
from lmpt.objectives.registry import build_objective
from lmpt.rng import generator

SEQ_LEN, BATCH, MAX_STEPS = 128, 32, 1000


def selected_share(objective, corpus, step: int, n_micro: int = 4) -> tuple[int, int]:
    """(selected, eligible) counts over a few micro-batches of optimizer step `step`."""
    selected = eligible = 0
    for micro in range(n_micro):
        w = windows(corpus, objective.window_length, BATCH, step * n_micro + micro)
        batch = objective.batch_at(w, generator(0, "objective", step, micro, 0), step)
        selected += int((batch.labels != IGNORE).sum())
        eligible += int((w.tokens >= objective.special.first_ordinary).sum())
    return selected, eligible


@pytest.mark.parametrize(
    "shape,step,rate",
    [
        ("linear", 0, 0.30),
        ("linear", MAX_STEPS // 2, 0.225),
        ("linear", MAX_STEPS // 4, 0.2625),
        ("linear", MAX_STEPS, 0.15),
        ("cosine", 0, 0.30),
        ("cosine", MAX_STEPS // 4, 0.30 - 0.15 * (1 - math.cos(math.pi / 4)) / 2),  # slower than linear early on
        ("cosine", MAX_STEPS // 2, 0.225),
        ("cosine", MAX_STEPS, 0.15),
        ("constant", 0, 0.15),
        ("constant", MAX_STEPS, 0.15),
    ],
)
def test_selected_share_follows_the_schedule(shakespeare, shape: str, step: int, rate: float) -> None:
    cfg = MlmConfig(mask_prob=0.15, mask_prob_start=0.3, mask_prob_schedule=shape)
    mlm = build_objective(cfg, shakespeare.tokenizer, SEQ_LEN, "auto")
    mlm.plan_run(MAX_STEPS)
    assert mlm.rate_at(step) == pytest.approx(rate)
    selected, eligible = selected_share(mlm, shakespeare.train, step)
    assert abs(selected - eligible * rate) < five_sigma(eligible, rate), (selected / eligible, rate)


def test_past_the_planned_end_the_rate_stays_at_the_end() -> None:
    assert scheduled_rate(0.3, 0.15, "linear", 1.0) == pytest.approx(0.15)
    assert scheduled_rate(0.3, 0.15, "cosine", 0.0) == pytest.approx(0.3)


def test_a_batch_is_a_function_of_the_step_and_the_run_length(shakespeare) -> None:
    cfg = MlmConfig(mask_prob_schedule="linear")
    make = lambda: build_objective(cfg, shakespeare.tokenizer, SEQ_LEN, "auto")
    first, resumed = make(), make()
    first.plan_run(MAX_STEPS)
    w = windows(shakespeare.train, SEQ_LEN, 4, 7)
    for step in range(5):  # a history of earlier batches changes nothing
        first.batch_at(w, generator(0, "objective", step, 0, 0), step)
    resumed.plan_run(MAX_STEPS)
    gen = lambda: generator(0, "objective", 600, 0, 0)
    assert_same_batch(first.batch_at(w, gen(), 600), resumed.batch_at(w, gen(), 600))
    held_out = first.make_batch(w, gen())  # held-out batches mask at mask_prob, the schedule's end
    constant = build_objective(MlmConfig(), shakespeare.tokenizer, SEQ_LEN, "auto")
    assert_same_batch(held_out, constant.make_batch(w, gen()))


def test_constant_schedule_keeps_mlm_bit_for_bit(shakespeare) -> None:
    mlm = build_objective(MlmConfig(), shakespeare.tokenizer, SEQ_LEN, "auto")
    mlm.plan_run(MAX_STEPS)
    w = windows(shakespeare.train, SEQ_LEN, 4, 3)
    gen = lambda: generator(0, "objective", 3, 0, 0)
    assert_same_batch(mlm.batch_at(w, gen(), 3), mlm.make_batch(w, gen()))


def test_expected_loss_fraction_is_the_mean_rate(shakespeare) -> None:
    cfg = MlmConfig(mask_prob=0.15, mask_prob_start=0.3, mask_prob_schedule="cosine")
    assert build_objective(cfg, shakespeare.tokenizer, SEQ_LEN, "auto").expected_loss_fraction == pytest.approx(0.225)


def test_an_unplanned_schedule_is_refused_loudly(shakespeare) -> None:
    mlm = build_objective(MlmConfig(mask_prob_schedule="linear"), shakespeare.tokenizer, SEQ_LEN, "auto")
    with pytest.raises(RuntimeError, match="plan_run"):
        mlm.batch_at(windows(shakespeare.train, SEQ_LEN, 2, 0), torch.Generator(), 0)


@pytest.mark.parametrize(
    "settings,message",
    [
        ({"mask_prob_schedule": "step"}, "objective.mask_prob_schedule=step is unknown: use constant, linear, cosine"),
        ({"mask_prob_start": 1.2}, "objective.mask_prob_start=1.2 must be in (0, 1)"),
    ],
)
def test_bad_schedules_are_refused(shakespeare, settings: dict, message: str) -> None:
    with pytest.raises(LmptError, match=message.replace("(", r"\(").replace(")", r"\)")):
        build_objective(MlmConfig(**settings), shakespeare.tokenizer, SEQ_LEN, "auto")
