"""`trainer.budget`'s value: an amount of compute (tokens, FLOPs or wall-clock minutes), parsed and checked with
the rest of the config; lmpt.train.budget turns it into steps."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from lmpt.errors import LmptError

UNITS = {
    "token": "tokens",
    "tokens": "tokens",
    "flop": "flops",
    "flops": "flops",
    "min": "minutes",
    "minute": "minutes",
    "minutes": "minutes",
    "epoch": "epochs",
    "epochs": "epochs",
}
SCALES = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "B": 1e9, "T": 1e12, "P": 1e15}
_BUDGET = re.compile(r"^\s*(\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)\s*([kKMGBTP]?)\s*_?([A-Za-z]+)\s*$")


@dataclass(frozen=True)
class Budget:
    """An amount of compute a run may spend."""

    amount: float
    unit: str
    """tokens (non-padding input tokens), flops (the model's training FLOP count), minutes (training time) or epochs
    (passes over the training text: data.unique_tokens, or all of it)."""

    def describe(self) -> str:
        """The budget in words, for the console and the dry-run plan."""
        if self.unit == "minutes":
            return f"{self.amount:g} minutes of training"
        if self.unit == "flops":
            return f"{self.amount:.3e} FLOPs"
        if self.unit == "epochs":
            return f"{self.amount:g} epoch{'' if self.amount == 1 else 's'} of the training text"
        return f"{self.amount:,.0f} tokens"


def parse_budget(text: str | None) -> Budget | None:
    """`trainer.budget`: e.g. 3e12flops, 2Mtokens, 5min, 16epochs (k, M, G/B, T, P scale the number); null = none."""
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
            "trainer.budget=2Mtokens, trainer.budget=16epochs or trainer.budget=5min"
        )
    amount = float(match.group(1)) * SCALES[match.group(2)]
    if not math.isfinite(amount):
        raise LmptError(f"trainer.budget={text} is more than a float holds: write a finite amount, e.g. 3e12flops")
    if not amount > 0:
        raise LmptError(f"trainer.budget={text} must be more than zero")
    return Budget(amount, unit)
