"""`trainer.budget`: train for an amount of compute (tokens, FLOPs or wall-clock minutes) instead of a step
count, in the style of cramming's budget. The schedule is laid over the budget, the run ends when it is
spent, and what earlier launches spent travels in the checkpoint."""

from __future__ import annotations

import math
from typing import Any

import torch

from lmpt.config.budget import Budget, parse_budget
from lmpt.config.schema import TrainerConfig
from lmpt.errors import LmptError
from lmpt.objectives.base import Objective
from lmpt.train.metrics import StepCost, Work, expected_step_cost, peak_flops

UNBOUNDED_STEPS = 2**62
"""Steps the data loader offers a budgeted run: the budget, not the loader, ends it."""


def refuse_two_lengths(max_steps: int, budget_text: str | None, given: set[str]) -> None:
    """A trainer.max_steps set on the command line beside a trainer.budget: both would say how long the run
    trains (the budget derives max_steps, so the given value would be ignored without a word)."""
    if "trainer.max_steps" in given and parse_budget(budget_text) is not None:
        raise LmptError(
            f"trainer.max_steps={max_steps} and trainer.budget={budget_text} both set how long the run trains: "
            "the budget derives max_steps; drop trainer.max_steps (or trainer.budget)"
        )


def derived_max_steps(budget: Budget, cost: StepCost) -> int:
    """Steps the budget buys at the expected cost per step (at least one)."""
    return max(1, math.ceil(budget.amount / max(cost.of(budget.unit), 1e-30)))


class RunLength:
    """How long a run trains: `max_steps`, or until its budget is spent (max_steps then derived from it)."""

    def __init__(self, max_steps: int, budget: Budget | None = None, rounding: str | None = None) -> None:
        self.max_steps = max_steps
        self.budget = budget
        self.work = Work()
        self.rounding = rounding
        """A sentence when the whole steps a budget in epochs buys train visibly more or fewer epochs than asked."""

    @property
    def loader_steps(self) -> int:
        return UNBOUNDED_STEPS if self.budget else self.max_steps

    def spent_fraction(self) -> float:
        """Share of the budget spent (a budgeted run only)."""
        assert self.budget is not None, "spent_fraction needs a budget"
        return self.work.spent(self.budget.unit) / self.budget.amount

    def finished(self, step: int) -> bool:
        """True once `step` reached max_steps, or the budget is spent."""
        if self.budget is None:
            return step >= self.max_steps
        return self.spent_fraction() >= 1.0

    def position(self) -> float | None:
        """Where the schedule stands, in steps of the derived max_steps: the share of the budget spent times
        max_steps. None without a budget (the schedule then follows the step count)."""
        return None if self.budget is None else self.spent_fraction() * self.max_steps


EPOCHS_TOLERANCE = 0.01
"""How far (a share of the epochs asked) the whole steps a budget in epochs buys may train from it unsaid."""


def epochs_rounding(budget_text: str | None, epochs: float, steps: int, epoch_steps: float) -> str | None:
    """The sentence saying that `steps` whole steps train other than the `epochs` asked (one step is 1/`epoch_steps`
    of an epoch), or None when they train it within EPOCHS_TOLERANCE."""
    trained = steps / epoch_steps
    if abs(trained - epochs) <= EPOCHS_TOLERANCE * epochs:
        return None
    return (
        f"trainer.budget={budget_text} buys whole steps: {steps:,} step(s) train {trained:.3g} epochs of this text "
        f"(a step is {1 / epoch_steps:.3g} epochs at this batch and sequence length)"
    )


def plan_length(budget_text: str | None, max_steps: int, cost: StepCost, epoch_steps: float | None = None) -> RunLength:
    """max_steps as configured, or the step count `trainer.budget` buys at the expected cost per step; a budget in
    epochs buys `epoch_steps` (the steps one pass over the training text takes) per epoch, a fixed step count."""
    budget = parse_budget(budget_text)
    if budget is None:
        return RunLength(max_steps)
    if budget.unit == "epochs":
        if epoch_steps is None:
            raise LmptError(
                f"trainer.budget={budget_text} counts passes over the training text, whose size is not known yet: "
                "give data.unique_tokens, or launch once to tokenise it (a dry run then sizes it)"
            )
        steps = max(1, math.ceil(budget.amount * epoch_steps - 1e-9))  # a step count: resumes recompute it
        return RunLength(steps, rounding=epochs_rounding(budget_text, budget.amount, steps, epoch_steps))
    return RunLength(derived_max_steps(budget, cost), budget)


def run_length(
    trainer: TrainerConfig,
    model: Any,
    objective: Objective,
    world_size: int,
    device: torch.device,
    dtype: torch.dtype,
    train_tokens: int | None = None,
) -> tuple[RunLength, StepCost, float, str]:
    """How long the run trains, from the expected cost of a step of `trainer`'s batch over `world_size` ranks
    against the device's peak (and, for a budget in epochs, the `train_tokens` of the training text); returns the
    length, that cost, the peak (FLOP/s) and what the peak is."""
    peak, source = peak_flops(device, dtype)
    examples = trainer.batch_size * trainer.grad_accum * world_size
    cost = expected_step_cost(model, objective, examples, peak)
    epoch_steps = None if train_tokens is None else train_tokens / (examples * objective.window_length)
    return plan_length(trainer.budget, trainer.max_steps, cost, epoch_steps), cost, peak, source
