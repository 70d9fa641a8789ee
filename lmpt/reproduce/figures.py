"""A reproduction's figures as its tables and claims write them: a mean over seeds with its 95% t interval, a count in
a few digits, the note after an objective whose figure is a bound, and the runs a figure still lacks."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from lmpt.downstream.significance import seed_interval
from lmpt.objectives.registry import OBJECTIVES


def interval(values: Sequence[float]) -> tuple[float, float, float]:
    """(mean, low, high): the mean and its 95% t interval over seeds (NaN ends with fewer than two)."""
    low, high = seed_interval(list(values)) or (math.nan, math.nan)
    return statistics.fmean(values), low, high


def spans(mean: float, low: float, high: float, spec: str = "+.2f") -> str:
    """'MEAN [LOW, HIGH]', or 'MEAN (one seed: no interval)'."""
    if math.isnan(low):
        return f"{mean:{spec}} (one seed: no interval)"
    return f"{mean:{spec}} [{low:{spec}}, {high:{spec}}]"


def mean_cell(values: list[float], spec: str = ".3f") -> str:
    """A table cell: the mean over seeds and its 95% t interval (the mean alone from one seed; a dash from none)."""
    if not values:
        return "—"
    span = seed_interval(values)
    mean = f"{statistics.fmean(values):{spec}}"
    return mean if span is None else f"{mean} [{span[0]:{spec}}, {span[1]:{spec}}]"


def bound_note(objective: str) -> str:
    """ " (bound)" after an objective whose held-out figure is an upper bound (its measure says so)."""
    return " (bound)" if OBJECTIVES[objective].likelihood == "bound" else ""


def count_text(n: float) -> str:
    """A count in a few digits: 36k, 1.1M, 2.5B."""
    if not math.isfinite(n):
        return f"{n:g}"
    for scale, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if n >= scale:
            return f"{n / scale:.3g}{suffix}"
    return f"{n:.3g}"


def missing_text(names: Sequence[str]) -> str:
    """The runs a claim lacks, the first four named: 'runs not completed: A, B, C, D and N more'."""
    if not names:
        return "its runs are missing"
    shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
    return f"runs not completed: {shown}"
