"""Whether pre-training shows, per objective, task and budget: each final run's gain over its untrained control
(downstream.control=scratch, RUN/downstream/TASK.json's `gain`), pooled over the study's pre-training seeds.

- Zero-shot (the same items scored by every run and its control): the runs' per-item outcomes stacked as
  [seeds, items] and the gain's 95% interval drawn by the two-way bootstrap over (seed, item) of
  lmpt.downstream.gain; on minimal pairs also on the pairs of equal token length.
- Fine-tuned (no per-item outcomes kept across fine-tuning seeds): the mean of the runs' gains with Student's t
  interval over the pre-training seeds (one seed: that run's own paired interval).

`verdict` then says, per task, at which budget the best objective's gain is told apart from 0, or, when it is at
none of the budgets measured, the budget at which it would be: the gain's straight line in log budget through the
measured points, extended until it clears the interval's mean half-width (an extrapolation, said as one)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from lmpt.config.budget import parse_budget
from lmpt.downstream.figures import ACCURACY, EQUAL_LENGTH_ACCURACY, GAIN, SCRATCH
from lmpt.downstream.gain import paired_gain
from lmpt.downstream.intervals import LEVEL, seed_interval
from lmpt.downstream.minimal_pairs import EQUAL_LENGTH_PAIRS
from lmpt.downstream.significance import decode_outcomes, items_key
from lmpt.report.significance import task_record
from lmpt.study.finals import FinalRun

FIGURES = (ACCURACY, EQUAL_LENGTH_ACCURACY)
"""The figures whose gain the study pools: accuracy, and on minimal pairs accuracy on the pairs of equal length."""
GainTable = dict[str, dict[str, dict[str, dict[str, "PooledGain"]]]]
"""budget -> objective -> task -> figure -> the pooled gain."""
FIGURE_WORDS = {ACCURACY: "accuracy", EQUAL_LENGTH_ACCURACY: "pairs of equal token length"}


@dataclass(frozen=True)
class PooledGain:
    """An objective's gain over its untrained control on one task figure at one budget, over its seeds."""

    gain: float
    low: float
    high: float
    seeds: int
    method: str

    @property
    def significant(self) -> bool:
        return self.low > 0 or self.high < 0

    def describe(self) -> dict[str, Any]:
        return {"gain": self.gain, "interval": [self.low, self.high], "significant": self.significant,
                "seeds": self.seeds, "method": self.method, "level": LEVEL}  # fmt: skip

    def __str__(self) -> str:
        mark = " *" if self.significant else ""
        return f"{self.gain:+.3f} [{self.low:+.3f}, {self.high:+.3f}]{mark}"


def _record(run: FinalRun, task: str) -> dict | None:
    """The run's record of `task` when it holds gains over a control."""
    record = task_record(run.path, task)
    return record if record is not None and isinstance(record.get(GAIN), dict) else None


def _zero_shot(records: list[dict], figure: str) -> PooledGain | None:
    """The two-way bootstrap over the runs' and their controls' per-item outcomes (None: a record lacks them)."""
    rows, controls, masks = [], [], []
    for record in records:
        correct = decode_outcomes(record.get(items_key(ACCURACY)))
        control = decode_outcomes(record.get(SCRATCH, {}).get(items_key(ACCURACY)))
        if correct is None or control is None or correct.shape != control.shape:
            return None
        rows.append(correct)
        controls.append(control)
        if figure == EQUAL_LENGTH_ACCURACY:
            mask = decode_outcomes(record.get(EQUAL_LENGTH_PAIRS))
            if mask is None or mask.shape != correct.shape:
                return None
            masks.append(mask)
    if len({r.shape for r in rows}) > 1:
        return None
    keep = np.logical_and.reduce(masks) if masks else np.ones_like(rows[0])
    if not keep.any():
        return None
    result = paired_gain(np.stack(rows)[:, keep], np.stack(controls)[:, keep])
    low, high = result["interval"]
    return PooledGain(result["gain"], low, high, len(rows), "two-way bootstrap over (seed, item)")


def _fine_tuned(records: list[dict]) -> PooledGain | None:
    """The runs' fine-tuned gains: their mean, t interval over the pre-training seeds (one seed: its own)."""
    entries = [r[GAIN].get(ACCURACY) for r in records]
    if not all(isinstance(e, dict) and isinstance(e.get("gain"), int | float) for e in entries):
        return None
    gains = [float(e["gain"]) for e in entries]
    if len(gains) == 1:
        low, high = entries[0]["interval"]
        return PooledGain(gains[0], float(low), float(high), 1, "paired bootstrap over fine-tuning seeds and items")
    interval = seed_interval(gains)
    assert interval is not None
    return PooledGain(float(np.mean(gains)), *interval, len(gains), "t over pre-training seeds")


def pooled_gains(runs: list[FinalRun], task: str) -> dict[str, PooledGain]:
    """By figure, the completed `runs`' (one objective, one budget) gain over their controls on `task`; empty when a
    run has no control on record."""
    records = [_record(r, task) for r in runs if r.status == "completed"]
    if not records or any(r is None for r in records):
        return {}
    found = [r for r in records if r is not None]
    if all(items_key(ACCURACY) in r for r in found):  # zero-shot: per-item outcomes kept
        gains = {figure: _zero_shot(found, figure) for figure in FIGURES}
    else:
        gains = {ACCURACY: _fine_tuned(found)}
    return {figure: g for figure, g in gains.items() if g is not None}


def study_gains(budgets: list[str], objectives: list[str], finals: dict[str, list[FinalRun]]) -> GainTable:
    """budget -> objective -> task -> figure -> its pooled gain, for every task the runs recorded."""
    table: GainTable = {}
    for budget in budgets:
        for name in objectives:
            runs = [f for f in finals.get(name, []) if f.budget == budget and f.status == "completed"]
            tasks = sorted({t for f in runs for t in f.tasks})
            for task in tasks:
                gains = pooled_gains(runs, task)
                if gains:
                    table.setdefault(budget, {}).setdefault(name, {})[task] = gains
    return table


def _log_amount(budget: str) -> float:
    parsed = parse_budget(budget)
    assert parsed is not None
    return math.log10(parsed.amount)


def _unit(budget: str) -> str:
    parsed = parse_budget(budget)
    assert parsed is not None
    return parsed.unit


def verdict(table: GainTable, task: str, figure: str = ACCURACY) -> str:
    """One sentence on `task`'s `figure`: the smallest budget at which the best objective's gain over its control is
    significantly above 0, or, at none, the budget its line in log budget reaches significance (or that it does
    not grow); "" when no budget has a gain on record."""
    budgets = [b for b in table if any(task in by_task and figure in by_task[task] for by_task in table[b].values())]
    if not budgets:
        return ""
    what = task if figure == ACCURACY else f"{task} ({FIGURE_WORDS.get(figure, figure)})"
    for budget in budgets:
        best = _best(table[budget], task, figure)
        if best is not None and best[1].significant and best[1].gain > 0:
            return (f"On {what}, {best[0]}'s gain over its untrained control is significant at {budget}: "
                    f"{best[1]} (95%, {best[1].method}).")  # fmt: skip
    top = _best(table[budgets[-1]], task, figure)
    assert top is not None
    name = top[0]
    points = [(b, table[b].get(name, {}).get(task, {}).get(figure)) for b in budgets]
    known = [(b, g) for b, g in points if g is not None]
    measured = "; ".join(f"{b} {g}" for b, g in known)
    head = f"On {what}, no objective's gain over its untrained control is significantly above 0 at any budget measured"
    if len(known) < 2:
        return f"{head} ({name}: {measured}); measure a second budget to say where it would be."
    x = np.array([_log_amount(b) for b, _ in known])
    y = np.array([g.gain for _, g in known])
    slope, intercept = np.polyfit(x, y, 1)
    half = float(np.mean([(g.high - g.low) / 2 for _, g in known]))
    if slope <= 0:
        return (f"{head} ({name}: {measured}), and the gain does not grow with the budget: this task will not "
                "measure pre-training on this data by a larger budget alone.")  # fmt: skip
    at = 10 ** ((half - intercept) / slope)
    return (f"{head} ({name}: {measured}). Extrapolated, a straight line in log budget through these points, the "
            f"gain would clear its ±{half:.3f} interval at about {at:.1e}{_unit(budgets[0])}.")  # fmt: skip


def _best(
    by_objective: dict[str, dict[str, dict[str, PooledGain]]], task: str, figure: str
) -> tuple[str, PooledGain] | None:
    """The objective with the largest gain on `task`'s `figure`, and the gain."""
    found = [(name, tasks[task][figure]) for name, tasks in by_objective.items() if figure in tasks.get(task, {})]
    return max(found, key=lambda p: p[1].gain) if found else None


def describe_gains(table: GainTable) -> dict:
    """The table as study.json keeps it."""
    return {b: {o: {t: {f: g.describe() for f, g in fs.items()} for t, fs in ts.items()} for o, ts in os_.items()}
            for b, os_ in table.items()}  # fmt: skip


def task_figures(table: GainTable) -> list[tuple[str, str]]:
    """Every (task, figure) with a pooled gain at some budget for some objective, sorted."""
    return sorted({(t, f) for by_objective in table.values() for tasks in by_objective.values()
                   for t, figures in tasks.items() for f in figures})  # fmt: skip


def gain_verdicts(table: GainTable) -> dict[str, str]:
    """`verdict` of every task's accuracy, and of its equal-length pairs where it has them (`TASK/FIGURE`)."""
    sentences = {f"{task}/{figure}": verdict(table, task, figure) for task, figure in task_figures(table)}
    return {key: sentence for key, sentence in sentences.items() if sentence}
