"""The gain of a pre-trained model over its control, with an interval paired over seeds and items: both were
fine-tuned with the same seeds and scored on the same items, so the difference is resampled as pairs. Each bootstrap
resample draws the seeds with replacement and, independently, the items with replacement (a two-way bootstrap over
(seed, item)), and takes the mean difference in correctness over the drawn seeds and items. Drawn from numpy's
seeded generator, as lmpt.downstream.intervals is, so the same predictions give the same interval everywhere."""

from __future__ import annotations

import numpy as np

from lmpt.downstream.intervals import LEVEL, RESAMPLES, SEED

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
