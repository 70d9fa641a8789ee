"""Whether pre-training shows: each objective's gain over its untrained control, per task and budget, pooled over
the study's seeds, and the verdicts said on it.

Each final run's gain over its untrained control (downstream.control=scratch, RUN/downstream/TASK.json's `gain`),
pooled over the study's pre-training seeds.

- Zero-shot (the same items scored by every run and its control): the runs' per-item outcomes stacked as
  [seeds, items] and the gain's 95% interval drawn by the two-way bootstrap over (seed, item) of
  lmpt.downstream.significance; on minimal pairs also on the pairs of equal token length.
- Fine-tuned (no per-item outcomes kept across fine-tuning seeds): the mean of the runs' gains with Student's t
  interval over the pre-training seeds (one seed: that run's own paired interval); the gain of accuracy, or of a
  regression's the drop in squared error (`mse`).

`verdict` then says, per task, at which budget the best objective's gain is told apart from 0, or, when it is at
none of the budgets measured, the budget at which it would be: the gain's straight line in log budget through the
measured points, extended until it clears the interval's mean half-width (an extrapolation, said as one)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lmpt.config.budget import parse_budget
from lmpt.downstream.figures import (
    ACCURACY,
    CHANCE,
    EQUAL_LENGTH_ACCURACY,
    GAIN,
    MSE,
    SCRATCH_ACCURACY,
    mean_of,
    metric_key,
)
from lmpt.downstream.records import task_record
from lmpt.downstream.significance import LEVEL, items_key, paired_gain, seed_interval
from lmpt.downstream.task import Result
from lmpt.study.runs import FinalRun

FIGURES = (ACCURACY, EQUAL_LENGTH_ACCURACY)
"""The figures whose gain the study pools: accuracy, and on minimal pairs accuracy on the pairs of equal length."""


FIGURE_WORDS = {
    ACCURACY: "accuracy",
    EQUAL_LENGTH_ACCURACY: "pairs of equal token length",
    MSE: "drop in squared error",
}


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
        return {
            "gain": self.gain,
            "interval": [self.low, self.high],
            "significant": self.significant,
            "seeds": self.seeds,
            "method": self.method,
            "level": LEVEL,
        }

    def __str__(self) -> str:
        mark = " *" if self.significant else ""
        return f"{self.gain:+.3f} [{self.low:+.3f}, {self.high:+.3f}]{mark}"


@dataclass(frozen=True)
class GainRow:
    """One pooled gain: an objective's gain over its untrained control on a task's figure at a budget."""

    budget: str
    objective: str
    task: str
    figure: str
    gain: PooledGain


@dataclass
class GainTable:
    """The study's gains over the untrained controls as flat rows, in the order they were pooled (budget, objective,
    task, figure); `flagged`: a sentence for each record left out because it does not match its run's log."""

    rows: list[GainRow] = field(default_factory=list)
    flagged: list[str] = field(default_factory=list)
    levels: dict[tuple[str, str, str], tuple[list[float], float]] = field(default_factory=dict)
    """(budget, objective, task) -> the runs' own zero-shot accuracies (a seed each) and the task's chance level, to
    say when a significant gain leaves an accuracy at chance."""

    def __bool__(self) -> bool:
        return bool(self.rows)

    def budgets(self) -> list[str]:
        """Every budget with a gain, in order."""
        return list(dict.fromkeys(r.budget for r in self.rows))

    def objectives(self, budget: str) -> list[str]:
        """Every objective with a gain at `budget`, in order."""
        return list(dict.fromkeys(r.objective for r in self.rows if r.budget == budget))

    def get(self, budget: str, objective: str, task: str, figure: str) -> PooledGain | None:
        """The pooled gain of `objective` on `task`'s `figure` at `budget`, None when there is none."""
        found = (
            r.gain for r in self.rows if (r.budget, r.objective, r.task, r.figure) == (budget, objective, task, figure)
        )
        return next(found, None)

    def task_figures(self) -> list[tuple[str, str]]:
        """Every (task, figure) with a pooled gain at some budget for some objective, sorted."""
        return sorted({(r.task, r.figure) for r in self.rows})

    def describe(self) -> dict:
        """The table as study.json keeps it: budget -> objective -> task -> figure -> the gain."""
        nested: dict = {}
        for r in self.rows:
            nested.setdefault(r.budget, {}).setdefault(r.objective, {}).setdefault(r.task, {})[r.figure] = (
                r.gain.describe()
            )
        return nested


def _record(run: FinalRun, task: str, flagged: list[str] | None = None) -> Result | None:
    """The run's record of `task` (read by the downstream codec) when it holds gains over a control and agrees with
    the figures the run logged (metrics.jsonl); a record that does not is left out, with a sentence naming it in
    `flagged`."""
    record = task_record(run.path, task)
    if record is None or record.gains is None:
        return None
    mismatch = _mismatch(run, task, record)
    if mismatch:
        if flagged is not None:
            flagged.append(
                f"{run.path / 'downstream' / f'{task}.json'} does not match its run's log ({mismatch}): "
                "its gain is left out of the study's."
            )
        return None
    return record


def _mean(outcomes: np.ndarray | None) -> float | None:
    return float(outcomes.mean()) if outcomes is not None and outcomes.size else None


def _zero_shot_record(record: Result) -> bool:
    """Whether the record keeps per-item outcomes (zero-shot) rather than per-seed figures (fine-tuned)."""
    return items_key(ACCURACY) in record.given


def gain_figure(record: Result) -> str:
    """The figure whose gain over the control a record keeps: a regression's squared error, else accuracy."""
    return MSE if record.gain(ACCURACY) is None and record.gain(MSE) is not None else ACCURACY


def _mismatch(run: FinalRun, task: str, record: Result) -> str:
    """What in `record` differs from the figures `run` logged for `task` (each compared where both hold it), or "".
    The figures pooled are the record's per-item outcomes (zero-shot) or gains (fine-tuned): they must be the ones
    the run's own scoring logged."""
    figure = gain_figure(record)
    gain = record.gain(figure)
    held = {f"{figure}_{GAIN}": gain.gain if gain is not None else None}
    if _zero_shot_record(record):
        held[ACCURACY] = _mean(record.items(ACCURACY))
        held[SCRATCH_ACCURACY] = _mean(record.control.items(ACCURACY) if record.control is not None else None)
    else:
        held[mean_of(figure)] = record.figure(mean_of(figure))
    for figure, value in held.items():
        logged = run.downstream.get(metric_key(task, figure))
        if logged is not None and (value is None or not math.isclose(value, logged, abs_tol=1e-9)):
            shown = "none" if value is None else f"{value:.4f}"
            return f"{figure} {shown} where metrics.jsonl logged {logged:.4f}"
    return ""


def _zero_shot(records: list[Result], figure: str) -> PooledGain | None:
    """The two-way bootstrap over the runs' and their controls' per-item outcomes (None: a record lacks them)."""
    rows, controls, masks = [], [], []
    for record in records:
        correct = record.items(ACCURACY)
        control = record.control.items(ACCURACY) if record.control is not None else None
        if correct is None or control is None or correct.shape != control.shape:
            return None
        rows.append(correct)
        controls.append(control)
        if figure == EQUAL_LENGTH_ACCURACY:
            mask = record.equal_length()
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


def _fine_tuned(records: list[Result], figure: str = ACCURACY) -> PooledGain | None:
    """The runs' fine-tuned gains of `figure`: their mean, t interval over the pre-training seeds (one seed: its
    own)."""
    entries = [r.gain(figure) for r in records]
    if not all(e is not None and e.gain is not None for e in entries):
        return None
    gains = [float(e.gain) for e in entries]  # type: ignore[union-attr,arg-type]
    if len(gains) == 1:
        interval = entries[0].interval  # type: ignore[union-attr]
        if interval is None:
            return None
        low, high = interval
        return PooledGain(gains[0], low, high, 1, "paired bootstrap over fine-tuning seeds and items")
    interval = seed_interval(gains)
    assert interval is not None
    return PooledGain(float(np.mean(gains)), *interval, len(gains), "t over pre-training seeds")


def pooled_gains(runs: list[FinalRun], task: str, flagged: list[str] | None = None) -> dict[str, PooledGain]:
    """By figure, the completed `runs`' (one objective, one budget) gain over their controls on `task`; empty when a
    run has no control on record, or a record that does not match its run's log (said in `flagged`)."""
    records = [_record(r, task, flagged) for r in runs if r.status == "completed"]
    if not records or any(r is None for r in records):
        return {}
    found = [r for r in records if r is not None]
    if all(_zero_shot_record(r) for r in found):  # zero-shot: per-item outcomes kept
        gains = {figure: _zero_shot(found, figure) for figure in FIGURES}
    else:
        figure = gain_figure(found[0])
        gains = {figure: _fine_tuned(found, figure)}
    return {figure: g for figure, g in gains.items() if g is not None}


def study_gains(budgets: list[str], objectives: list[str], finals: dict[str, list[FinalRun]]) -> GainTable:
    """The pooled gain of every objective at every budget on every figure of every task the runs recorded (the
    study's own: lmpt.study.runs reads no other), each record checked against its run's log."""
    table = GainTable()
    for budget in budgets:
        for name in objectives:
            runs = [f for f in finals.get(name, []) if f.budget == budget and f.status == "completed"]
            tasks = sorted({t for f in runs for t in f.tasks})
            for task in tasks:
                gains = pooled_gains(runs, task, table.flagged)
                table.rows += [GainRow(budget, name, task, figure, gain) for figure, gain in gains.items()]
                accuracies = [
                    f.downstream[metric_key(task, ACCURACY)] for f in runs if metric_key(task, ACCURACY) in f.downstream
                ]
                chances = {
                    f.downstream[metric_key(task, CHANCE)] for f in runs if metric_key(task, CHANCE) in f.downstream
                }
                if accuracies and len(chances) == 1:
                    table.levels[(budget, name, task)] = (accuracies, chances.pop())
    return table


def at_chance(table: GainTable, budget: str, objective: str, task: str) -> str:
    """ ", but its accuracy ... is at chance ..." where the objective's own accuracy on `task` at `budget` is not told
    apart from the task's chance level (its 95% interval over the seeds holds it, or lies below), else ""."""
    found = table.levels.get((budget, objective, task))
    if found is None:
        return ""
    accuracies, chance = found
    interval = seed_interval(accuracies)
    if interval is None or interval[0] > chance:
        return ""
    mean = sum(accuracies) / len(accuracies)
    return (
        f"; but its accuracy, {mean:.3f} [{interval[0]:.3f}, {interval[1]:.3f}], is not above chance ({chance:.3f}): "
        "the gain lifts an untrained control below chance toward it, which is no sign of what pre-training taught"
    )


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
    budgets = list(dict.fromkeys(r.budget for r in table.rows if (r.task, r.figure) == (task, figure)))
    if not budgets:
        return ""
    what = task if figure == ACCURACY else f"{task} ({FIGURE_WORDS.get(figure, figure)})"
    for budget in budgets:
        best = _best(table, budget, task, figure)
        if best is not None and best[1].significant and best[1].gain > 0:
            chance = at_chance(table, budget, best[0], task) if figure == ACCURACY else ""
            return (
                f"On {what}, {best[0]}'s gain over its untrained control is significant at {budget}: "
                f"{best[1]} (95%, {best[1].method}){chance}."
            )
    top = _best(table, budgets[-1], task, figure)
    assert top is not None
    name = top[0]
    points = [(b, table.get(b, name, task, figure)) for b in budgets]
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
        return (
            f"{head} ({name}: {measured}), and the gain does not grow with the budget: this task will not "
            "measure pre-training on this data by a larger budget alone."
        )
    at = 10 ** ((half - intercept) / slope)
    unit = _unit(budgets[0])
    caveat = _how_uncertain(x, known, half, unit)
    return (
        f"{head} ({name}: {measured}). {caveat} Extrapolated, a straight line in log budget through these points, "
        f"the gain would clear its ±{half:.3f} interval at about {at:.1e}{unit}."
    )


def _how_uncertain(x: np.ndarray, known: list[tuple[str, PooledGain]], half: float, unit: str) -> str:
    """How far the extrapolated budget can be trusted: the line's slope with its 95% range, weighting each point by
    its interval (its half-width read as 1.96 standard errors), and the budgets that range puts the crossing at."""
    y = np.array([g.gain for _, g in known])
    weight = 1 / np.array([max((g.high - g.low) / 2 / 1.96, 1e-12) for _, g in known]) ** 2
    xw, yw = np.average(x, weights=weight), np.average(y, weights=weight)
    spread = float(np.sum(weight * (x - xw) ** 2))
    slope = float(np.sum(weight * (x - xw) * (y - yw)) / spread)
    low, high = slope - 1.96 / math.sqrt(spread), slope + 1.96 / math.sqrt(spread)
    text = f"Uncertain: the gains' 95% intervals allow a slope of {low:+.3f} to {high:+.3f} a decade of budget"
    crossings = sorted(10 ** (xw + (half - yw) / b) for b in (low, high) if b > 0)
    if low <= 0:
        near = f" (nearest {crossings[0]:.1e}{unit})" if crossings else ""
        return f"{text}, which holds 0: the gain may never clear its interval by budget alone{near}."
    return f"{text}, which puts that budget anywhere from {crossings[0]:.1e} to {crossings[-1]:.1e}{unit}."


def _best(table: GainTable, budget: str, task: str, figure: str) -> tuple[str, PooledGain] | None:
    """The objective with the largest gain on `task`'s `figure` at `budget`, and the gain."""
    found = [(r.objective, r.gain) for r in table.rows if (r.budget, r.task, r.figure) == (budget, task, figure)]
    return max(found, key=lambda p: p[1].gain) if found else None


def gain_verdicts(table: GainTable) -> dict[str, str]:
    """`verdict` of every task's accuracy, and of its equal-length pairs where it has them (`TASK/FIGURE`), then a
    sentence for each record left out (`mismatch/N`)."""
    sentences = {f"{task}/{figure}": verdict(table, task, figure) for task, figure in table.task_figures()}
    sentences |= {f"mismatch/{i}": s for i, s in enumerate(table.flagged)}
    return {key: sentence for key, sentence in sentences.items() if sentence}
