"""The statistics of the downstream figures: their intervals, a model's gain over its control, whether two runs'
figures differ beyond noise, and what a zero-shot record keeps so that they can be paired: per item, whether the run
answered it right.

- Zero-shot (the same items scored by both runs): McNemar's exact test, the two-sided binomial test of the
  discordant items (right in one run, wrong in the other) against 1/2 (McNemar 1947; scipy.stats.binomtest).
- Fine-tuned (a figure per seed): Welch's t-test over the seeds (scipy.stats.ttest_ind, equal_var=False). Seeds
  are not paired across runs: the same seed draws a different head and batch order in a model of another size.
- Many neighbours tested in one table: Holm's step-down correction (Holm 1979) of the family's p-values.

A record's figure F carries F_low and F_high (its bootstrap interval, below) and F_items, one
character per item in task order, "1" right and "0" wrong (a string: a long task stays one line of the JSON record),
beside ITEMS_DIGEST, a digest of the items' texts: two runs pair only when they scored the same items.

Confidence intervals of a figure that is a mean over items (accuracy over questions or minimal pairs): the
percentile bootstrap over items (Efron & Tibshirani 1993, ch. 13; scipy.stats.bootstrap), drawn from numpy's seeded
generator so the same items give the same interval on every run and machine; and Student's t interval of a mean over
fine-tuning seeds (scipy.stats.t).

The gain of a pre-trained model over its control, with an interval paired over seeds and items: both were
fine-tuned with the same seeds and scored on the same items, so the difference is resampled as pairs. Each bootstrap
resample draws the seeds with replacement and, independently, the items with replacement (a two-way bootstrap over
(seed, item)), and takes the mean difference in correctness over the drawn seeds and items. Drawn from numpy's
seeded generator, as the intervals are, so the same predictions give the same interval everywhere."""

from __future__ import annotations

import hashlib
import math
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lmpt.downstream.figures import ACCURACY

ITEMS_DIGEST = "items_digest"
"""The record's key of the digest of its items' texts (`items_digest`)."""


def items_key(figure: str) -> str:
    """The record's key of a figure's per-item outcomes (`accuracy_items`)."""
    return f"{figure}_items"


def low_key(figure: str) -> str:
    return f"{figure}_low"


def high_key(figure: str) -> str:
    return f"{figure}_high"


def encode_outcomes(correct: Sequence[float] | np.ndarray) -> str:
    """One character per item in item order: "1" right, "0" wrong."""
    return "".join("1" if c else "0" for c in np.asarray(correct, dtype=bool))


def decode_outcomes(text: object) -> np.ndarray | None:
    """The bool vector `encode_outcomes` wrote; None for anything else (a record from before per-item outcomes)."""
    if not isinstance(text, str) or not text or set(text) - {"0", "1"}:
        return None
    return np.frombuffer(text.encode("ascii"), dtype=np.uint8) == ord("1")


def items_digest(texts: Iterable[str]) -> str:
    """A short digest of the items' texts in order: equal digests, the same items."""
    digest = hashlib.sha256()
    for text in texts:
        digest.update(text.encode("utf-8") + b"\x00")
    return digest.hexdigest()[:16]


def figure_outcomes(
    figure: str, correct: Sequence[float] | np.ndarray, interval: Sequence[float] | None = None
) -> dict:
    """{F_low, F_high, F_items} of a figure that is the share of items right (empty for no items); `interval`: the
    bootstrap interval when the caller has it already."""
    items = np.asarray(correct, dtype=np.float64)
    if items.size == 0:
        return {}
    low, high = interval if interval is not None else bootstrap_interval(items)
    return {low_key(figure): low, high_key(figure): high, items_key(figure): encode_outcomes(items)}


def mcnemar_exact(a: Sequence[bool] | np.ndarray, b: Sequence[bool] | np.ndarray) -> float:
    """Two-sided p of McNemar's exact test: are runs `a` and `b` (per-item right/wrong on the same items) equally
    often right? 1.0 when no item is right in one and wrong in the other."""
    from scipy.stats import binomtest  # scipy on demand: the report's --help needs none

    a, b = np.asarray(a, dtype=bool), np.asarray(b, dtype=bool)
    if a.shape != b.shape:
        raise ValueError(f"paired outcomes need the same items: {a.size} against {b.size}")
    only_a, only_b = int(np.sum(a & ~b)), int(np.sum(~a & b))
    if only_a + only_b == 0:
        return 1.0
    return float(binomtest(only_a, only_a + only_b, 0.5).pvalue)


def welch_t(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> float | None:
    """Two-sided p of Welch's t-test between the per-seed figures `a` and `b`; None with fewer than two seeds a side.
    Two samples without spread are equal (p 1) or apart (p 0)."""
    from scipy.stats import ttest_ind

    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.size < 2 or b.size < 2:
        return None
    if np.ptp(a) == 0 and np.ptp(b) == 0:
        return 1.0 if a[0] == b[0] else 0.0
    with warnings.catch_warnings():  # seeds that agree to the last digits: scipy warns of precision, p stands
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(ttest_ind(a, b, equal_var=False).pvalue)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values (same order): the k-th smallest times (m - k + 1), kept non-decreasing, at most 1."""
    p = np.asarray(p_values, dtype=np.float64)
    order = np.argsort(p, kind="stable")
    steps = np.maximum.accumulate(np.minimum(1.0, (p.size - np.arange(p.size)) * p[order]))
    adjusted = np.empty_like(p)
    adjusted[order] = steps
    return [float(v) for v in adjusted]


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


_CHUNK_CELLS = 4_000_000  # resample x item cells held in memory at once: about 32 MB


def decidable(items: int, level: float = LEVEL) -> bool:
    """Whether `items` items can tell a gain from 0 at `level` at all: the exact sign test's smallest two-sided p on
    them (every item for one side), 2 ** (1 - items), is below 1 - level (6 items at 95%). Fewer items' resamples
    repeat a few outcomes, and their interval can leave out 0 while no test could."""
    return 2.0 ** (1 - items) < 1 - level


def paired_gain(
    correct: np.ndarray, control: np.ndarray, level: float = LEVEL, resamples: int = RESAMPLES, seed: int = SEED
) -> dict:
    """`correct` and `control`: [seeds, items] booleans (item i right under seed s) of the model and its control.
    {"gain": mean accuracy difference, "interval": [low, high] at `level`, "significant": whether the interval
    leaves out 0, "seeds", "items"}."""
    a, b = np.asarray(correct, dtype=np.float64), np.asarray(control, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 2 or a.size == 0:
        raise ValueError(f"paired predictions need two equal non-empty [seeds, items] arrays, got {a.shape}, {b.shape}")
    diff = a - b
    n_seeds, n_items = diff.shape
    rng = np.random.default_rng(seed)
    means = np.empty(resamples, dtype=np.float64)
    per_chunk = max(1, _CHUNK_CELLS // n_items)
    for begin in range(0, resamples, per_chunk):
        count = min(per_chunk, resamples - begin)
        seed_counts = rng.multinomial(n_seeds, np.full(n_seeds, 1 / n_seeds), size=count)  # [count, seeds]
        item_counts = rng.multinomial(n_items, np.full(n_items, 1 / n_items), size=count)  # [count, items]
        means[begin : begin + count] = ((seed_counts @ diff) * item_counts).sum(axis=1) / (n_seeds * n_items)
    tail = (1 - level) / 2
    low, high = (float(q) for q in np.quantile(means, [tail, 1 - tail]))
    return {
        "gain": float(diff.mean()),
        "interval": [low, high],
        "significant": bool(decidable(n_items, level) and (low > 0 or high < 0)),
        "level": level,
        "seeds": n_seeds,
        "items": n_items,
    }


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class Gain:
    """A figure's gain over the untrained control as a record keeps it (`gain.FIGURE`): `paired_gain`'s figures beside
    the two means. Read from any JSON value (`from_json`): a field that is not what it should be reads as None."""

    gain: float | None
    interval: tuple[float, float] | None
    """The gain's 95% interval; None when the record holds none (or not two numbers)."""
    pretrained: float | None
    """The run's own figure the gain is of."""
    scratch: float | None
    """The control's figure."""
    significant: bool | None = None
    level: float | None = None
    seeds: int | None = None
    items: int | None = None

    @classmethod
    def from_json(cls, raw: object) -> Gain | None:
        if not isinstance(raw, dict):
            return None
        interval = raw.get("interval")
        pair = [_number(v) for v in interval] if isinstance(interval, list) and len(interval) == 2 else []
        bounds = (pair[0], pair[1]) if len(pair) == 2 and pair[0] is not None and pair[1] is not None else None
        significant, seeds, items = raw.get("significant"), raw.get("seeds"), raw.get("items")
        return cls(
            _number(raw.get("gain")),
            bounds,
            _number(raw.get("pretrained")),
            _number(raw.get("scratch")),
            significant if isinstance(significant, bool) else None,
            _number(raw.get("level")),
            seeds if isinstance(seeds, int) and not isinstance(seeds, bool) else None,
            items if isinstance(items, int) and not isinstance(items, bool) else None,
        )

    def to_json(self) -> dict[str, Any]:
        """The gain as records write it (the means first, then `paired_gain`'s keys)."""
        interval = list(self.interval) if self.interval is not None else None
        return {
            "pretrained": self.pretrained,
            "scratch": self.scratch,
            "gain": self.gain,
            "interval": interval,
            "significant": self.significant,
            "level": self.level,
            "seeds": self.seeds,
            "items": self.items,
        }


def describe_gain(name: str, gain: dict) -> str:
    """One plain sentence: the gain, its interval and whether it is told apart from 0."""
    low, high = gain["interval"]
    if gain["significant"]:
        verdict = "significant"
    elif low > 0 or high < 0:
        verdict = f"NOT significant: {gain['items']} item(s) are too few to tell any gain from 0"
    else:
        verdict = "NOT significant: the interval holds 0"
    return (
        f"{name} gain over the scratch control {gain['gain']:+.4f}, {gain['level']:.0%} interval [{low:+.4f}, "
        f"{high:+.4f}] (paired bootstrap over {gain['seeds']} seed(s) x {gain['items']:,} items): {verdict}"
    )
