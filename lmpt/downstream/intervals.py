"""Confidence intervals of a figure that is a mean over items (accuracy over questions or minimal pairs): the
percentile bootstrap over items (Efron & Tibshirani 1993, ch. 13; scipy.stats.bootstrap), drawn from numpy's seeded
generator so the same items give the same interval on every run and machine; and Student's t interval of a mean over
fine-tuning seeds (scipy.stats.t)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from lmpt.downstream.figures import ACCURACY

LEVEL = 0.95
"""Coverage of the reported intervals."""
RESAMPLES = 1000
"""Bootstrap resamples per interval."""
SEED = 0
"""Seed of the resampling (every interval draws from its own generator seeded with it)."""
_CHUNK_DRAWS = 4_000_000  # item draws held in memory at once: about 32 MB of indices


def bootstrap_interval(
    values: Sequence[float] | np.ndarray, level: float = LEVEL, resamples: int = RESAMPLES, seed: int = SEED
) -> tuple[float, float]:
    """(low, high): the percentile bootstrap interval of the mean of `values` at coverage `level`; each of
    `resamples` resamples draws len(values) items with replacement. Refuses an empty sample."""
    items = np.asarray(values, dtype=np.float64)
    if items.ndim != 1 or items.size == 0:
        raise ValueError("a bootstrap interval needs a non-empty 1-d sample")
    if not 0 < level < 1 or resamples < 1:
        raise ValueError(f"level={level} must lie in (0, 1) and resamples={resamples} be positive")
    if items.size == 1:  # every resample is the one item (scipy asks for two)
        return float(items[0]), float(items[0])
    from scipy.stats import bootstrap  # scipy on demand: a command's --help needs none

    result = bootstrap(
        (items,),
        np.mean,
        n_resamples=resamples,
        confidence_level=level,
        method="percentile",
        rng=np.random.default_rng(seed),
        vectorized=True,
        batch=max(1, _CHUNK_DRAWS // items.size),  # resamples drawn at once
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def accuracy_with_interval(
    correct: Sequence[float] | np.ndarray, level: float = LEVEL, resamples: int = RESAMPLES, seed: int = SEED
) -> dict:
    """{"n", "accuracy" (the mean of `correct`, 1 per item right, 0 wrong), "interval": [low, high]}; an empty
    sample gives n 0 and nulls (a subset that no item falls in, e.g. no pair of equal length)."""
    items = np.asarray(correct, dtype=np.float64)
    if items.size == 0:
        return {"n": 0, ACCURACY: None, "interval": None}
    low, high = bootstrap_interval(items, level, resamples, seed)
    return {"n": int(items.size), ACCURACY: float(items.mean()), "interval": [low, high]}


def seed_interval(values: Sequence[float] | np.ndarray, level: float = LEVEL) -> tuple[float, float] | None:
    """(low, high): Student's t interval of the mean over seeds at coverage `level`; None with fewer than two."""
    from scipy.stats import t  # scipy on demand: a command's --help needs none

    items = np.asarray(values, dtype=np.float64)
    if items.size < 2:
        return None
    mean, sem = float(items.mean()), float(items.std(ddof=1) / math.sqrt(items.size))
    if sem == 0:
        return mean, mean
    low, high = t.interval(level, items.size - 1, loc=mean, scale=sem)
    return float(low), float(high)
