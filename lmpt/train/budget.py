"""`trainer.budget`: train for an amount of compute (tokens, FLOPs or wall-clock minutes) instead of a step
count, in the style of cramming's budget. The schedule is laid over the budget, the run ends when it is
spent, and what earlier launches spent travels in the checkpoint."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from lmpt.errors import LmptError
from lmpt.train.efficiency import StepCost
from lmpt.train.work import Work

UNITS = {"token": "tokens", "tokens": "tokens", "flop": "flops", "flops": "flops", "min": "minutes",
         "minute": "minutes", "minutes": "minutes"}  # fmt: skip
SCALES = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "B": 1e9, "T": 1e12, "P": 1e15}
_BUDGET = re.compile(r"^\s*(\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)\s*([kKMGBTP]?)\s*_?([A-Za-z]+)\s*$")
UNBOUNDED_STEPS = 2**62
"""Steps the data loader offers a budgeted run: the budget, not the loader, ends it."""


@dataclass(frozen=True)
class Budget:
    """An amount of compute a run may spend."""

    amount: float
    unit: str
    """tokens (non-padding input tokens), flops (the model's training FLOP count) or minutes (training time)."""

    def describe(self) -> str:
        """The budget in words, for the console and the dry-run plan."""
        if self.unit == "minutes":
            return f"{self.amount:g} minutes of training"
        if self.unit == "flops":
            return f"{self.amount:.3e} FLOPs"
        return f"{self.amount:,.0f} tokens"


def parse_budget(text: str | None) -> Budget | None:
    """`trainer.budget`: e.g. 3e12flops, 2Mtokens, 5min (k, M, G/B, T, P scale the number); null = none."""
    if text is None or str(text).strip() in ("", "null", "none"):
        return None
    match = _BUDGET.match(str(text))
    unit = UNITS.get(match.group(3).lower()) if match else None
    if match is None or unit is None:
        try:
            number = f"{float(text):g}"  # Hydra hands a bare number over as a float's text
        except ValueError:
            number = None
        what = f"{number} names no unit" if number else f"{text} is not a budget"
        raise LmptError(
            f"trainer.budget={what}: write an amount and a unit, e.g. trainer.budget=3e12flops, "
            "trainer.budget=2Mtokens or trainer.budget=5min"
        )
    amount = float(match.group(1)) * SCALES[match.group(2)]
    if not math.isfinite(amount):
        raise LmptError(f"trainer.budget={text} is more than a float holds: write a finite amount, e.g. 3e12flops")
    if not amount > 0:
        raise LmptError(f"trainer.budget={text} must be more than zero")
    return Budget(amount, unit)


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

    def __init__(self, max_steps: int, budget: Budget | None = None) -> None:
        self.max_steps = max_steps
        self.budget = budget
        self.work = Work()

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


def plan_length(budget_text: str | None, max_steps: int, cost: StepCost) -> RunLength:
    """max_steps as configured, or the step count `trainer.budget` buys at the expected cost per step."""
    budget = parse_budget(budget_text)
    if budget is None:
        return RunLength(max_steps)
    return RunLength(derived_max_steps(budget, cost), budget)
