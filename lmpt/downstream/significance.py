"""Whether two runs' downstream figures differ beyond noise, and what a zero-shot record keeps so that they can be
paired: per item, whether the run answered it right.

- Zero-shot (the same items scored by both runs): McNemar's exact test, the two-sided binomial test of the
  discordant items (right in one run, wrong in the other) against 1/2 (McNemar 1947; scipy.stats.binomtest).
- Fine-tuned (a figure per seed): Welch's t-test over the seeds (scipy.stats.ttest_ind, equal_var=False). Seeds
  are not paired across runs: the same seed draws a different head and batch order in a model of another size.
- Many neighbours tested in one table: Holm's step-down correction (Holm 1979) of the family's p-values.

A record's figure F carries F_low and F_high (its bootstrap interval, lmpt.downstream.intervals) and F_items, one
character per item in task order, "1" right and "0" wrong (a string: a long task stays one line of the JSON record),
beside ITEMS_DIGEST, a digest of the items' texts: two runs pair only when they scored the same items."""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Iterable, Sequence

import numpy as np

from lmpt.downstream.intervals import bootstrap_interval

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
