"""Whether a task measures pre-training at all. With control=scratch a run's record of the task
(RUN/downstream/TASK.json) keeps the gain of its model over the same architecture freshly initialised and fine-tuned or
scored the same way, with a 95% interval paired over seeds and items (lmpt.downstream.significance). When no ranked
run's gain is told apart from 0, the ranking says so in one sentence: at this scale the task does not measure
pre-training."""

from __future__ import annotations

import math
from dataclasses import dataclass

from lmpt.downstream.figures import METRIC_PREFIX, SCRATCH, task_figure
from lmpt.downstream.records import task_record
from lmpt.report.ranking import Ranking
from lmpt.report.runs import RunSummary
from lmpt.report.table import Column

MEAN_SUFFIX = "_mean"  # a fine-tuned figure: the mean over seeds (lmpt.downstream.figures.mean_of)


@dataclass(frozen=True)
class ControlGain:
    """A run's gain over its from-scratch control, with the gain's 95% interval."""

    gain: float
    low: float
    high: float
    control: float | None = None
    """The control's own figure, as the record holds it."""

    @property
    def within_noise(self) -> bool:
        """The interval holds 0: the gain is not told apart from none."""
        return self.low <= 0 <= self.high

    def __str__(self) -> str:
        return f"{self.gain:+.3f} [{self.low:+.3f}, {self.high:+.3f}]"


def control_gain(run: RunSummary, key: str) -> ControlGain | None:
    """The gain of `key`'s figure (a fine-tuned `downstream/TASK/FIGURE_mean` or a zero-shot `downstream/TASK/FIGURE`)
    over the run's scratch control, from its record; None for a figure without a gain on record, a record without a
    control, or one that no longer holds the logged figure (scored again since, with other settings)."""
    task, figure = task_figure(key).rsplit("/", 1)
    record = task_record(run.path, task)
    entry = record.gain(figure.removesuffix(MEAN_SUFFIX)) if record is not None else None
    if entry is None or entry.gain is None or entry.interval is None:
        return None
    logged = run.downstream.get(key)
    if logged is not None and (entry.pretrained is None or not math.isclose(entry.pretrained, logged)):
        return None
    return ControlGain(entry.gain, *entry.interval, entry.scratch)


def control_key(key: str) -> str:
    """`downstream/TASK/scratch_FIGURE`: the key the scratch control's figure is logged under beside the ranked
    `downstream/TASK/FIGURE` (scratch_accuracy zero-shot, scratch_accuracy_mean fine-tuned)."""
    task, figure = key.rsplit("/", 1)
    return f"{task}/{SCRATCH}_{figure}"


def control_columns(runs: list[RunSummary], ranking: Ranking) -> list[Column]:
    """The CSV and Markdown columns of the ranked figure's from-scratch control: its figure and the run's gain over it
    with the gain's 95% interval, from the run's record (the logged control figure where the record has none); none
    when no ranked run had a control."""
    if ranking.key is None or not ranking.key.startswith(METRIC_PREFIX):
        return []
    key, figure = ranking.key, task_figure(ranking.key)
    gains = {id(r): control_gain(r, key) for r in runs if ranking.value(r) is not None}
    logged = control_key(key)
    if not any(gains.values()) and not any(logged in r.downstream for r in runs):
        return []
    control = lambda r: r.downstream.get(logged, g.control if (g := gains.get(id(r))) else None)
    part = lambda name: lambda r: getattr(g, name) if (g := gains.get(id(r))) else None
    digits = lambda v: "" if v is None else f"{v:.4f}"
    signed = lambda v: "" if v is None else f"{v:+.4f}"
    return [
        Column(f"{figure}_control", control, digits, numeric=True),
        Column(f"{figure}_gain", part("gain"), signed, numeric=True),
        Column(f"{figure}_gain_low", part("low"), signed, numeric=True),
        Column(f"{figure}_gain_high", part("high"), signed, numeric=True),
    ]


def within_noise_sentence(ranked: list[RunSummary], ranking: Ranking) -> str:
    """One sentence when every ranked run's gain over its from-scratch control has a 95% interval holding 0, naming
    the best gain; "" when a fine-tuned figure does not rank, a ranked run has no gain on record, or any run's gain
    is told apart from 0 (then the task does measure pre-training)."""
    if ranking.key is None or not ranking.key.startswith(METRIC_PREFIX):
        return ""
    gains = [control_gain(r, ranking.key) for r in ranked if ranking.value(r) is not None]
    known = [g for g in gains if g is not None]
    if not known or len(known) < len(gains) or not all(g.within_noise for g in known):
        return ""
    best = max(known, key=lambda g: g.gain)
    task = task_figure(ranking.key).rsplit("/", 1)[0]
    every = ", as is every run's" if len(known) > 1 else ""
    return (
        f"On {task} the {'best ' if len(known) > 1 else ''}gain over the from-scratch control ({best}) is within "
        f"noise{every}: this task does not measure pre-training at this scale."
    )
