"""A study's search space as ranges, and the recipes drawn from it.

Each `study.space` expression (Hydra's sweep syntax: `interval(LOW, HIGH)`, `tag(log, interval(LOW, HIGH))`,
`choice(A, B, ...)`) is read and checked at planning as a Range. A new study draws its recipes as optuna's
RandomSampler did for hydra-optuna-sweeper (trial by trial, the keys in the space's order; a range of one value takes
no draw), so today's command gives the recipes it always gave."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import ChoiceSweep, IntervalSweep, Transformer
from hydra.errors import HydraException

FORMS = "interval(LOW, HIGH), tag(log, interval(LOW, HIGH)) or choice(A, B, ...)"


@dataclass(frozen=True)
class Range:
    """One searched key's range: an interval of floats (log-uniform or uniform), or a list of choices."""

    low: float = 0.0
    high: float = 0.0
    log: bool = False
    choices: tuple[object, ...] = ()

    def draw(self, rng: np.random.RandomState) -> object:
        """A value as optuna's RandomSampler draws it from the matching distribution (none drawn from a range of one
        value, as optuna skips the sampler for it)."""
        if self.choices:
            if len(self.choices) == 1:
                return self.choices[0]
            return self.choices[int(rng.uniform(np.zeros(len(self.choices)), np.ones(len(self.choices))).argmax())]
        if self.low == self.high:
            return self.low
        if self.log:
            value = math.exp(rng.uniform(math.log(self.low), math.log(self.high)))
        else:
            value = float(rng.uniform(self.low, self.high))
        return min(value, float(np.nextafter(self.high, self.high - 1)))  # optuna keeps a draw below `high`


def read_range(key: str, expression: str) -> Range:
    """`expression` of `study.space`'s `key` as a Range; ValueError (one line, naming the key) when it is none of
    FORMS."""
    try:
        override = OverridesParser.create().parse_overrides([f"{key}={expression}"])[0]
    except HydraException:
        raise ValueError(f"study.space: {key}={expression} cannot be read: give {FORMS}") from None
    value = override.value()
    if isinstance(value, IntervalSweep) and value.tags <= {"log"}:
        low, high = float(value.start), float(value.end)  # type: ignore[arg-type]
        if not (math.isfinite(low) and math.isfinite(high)):
            raise ValueError(f"study.space: {key}={expression} has an end that is not a finite number: give both")
        if not low <= high:
            raise ValueError(f"study.space: {key}={expression} has its low end above its high end")
        if "log" in value.tags and low <= 0:
            raise ValueError(f"study.space: {key}={expression} is log-uniform: its low end must be above 0")
        return Range(low, high, log="log" in value.tags)
    if isinstance(value, ChoiceSweep) and not value.tags and value.list:
        return Range(choices=tuple(override.sweep_iterator(transformer=Transformer.encode)))
    raise ValueError(f"study.space: {key}={expression} is no search range: give {FORMS}")


def read_space(space: dict[str, str]) -> dict[str, Range]:
    """Every key's Range, in the space's order; ValueError on the first bad expression."""
    return {key: read_range(key, expression) for key, expression in space.items()}


def draw_recipes(space: dict[str, Range], trials: int, seed: int) -> list[dict[str, str]]:
    """`trials` recipes (key -> value as a command line gives it), drawn from `seed`: trial by trial, each key in
    turn, from one stream, as hydra-optuna-sweeper asks optuna's RandomSampler."""
    rng = np.random.RandomState(seed)
    return [{key: str(r.draw(rng)) for key, r in space.items()} for _ in range(trials)]
