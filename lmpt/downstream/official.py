"""A task's own metrics, as a benchmark names them (`TaskMetric`: GLUE's CoLA Matthews correlation, MRPC's F1 and
accuracy, MNLI's accuracy on its matched and its mismatched dev set ...), each computed by a metric of the one table
(lmpt.downstream.figures.METRICS, where each metric says which way is better), and the task's score, their mean.

A labelled task carries its own metrics (lmpt.downstream.labelled.LabelledTask.metrics: none for a task scored by its
kind's figures alone, classification's accuracy, macro-F1 and MCC or regression's correlations), and every fine-tuning
computes them the same way, from each seed's predictions written as the task's files write labels
(`official_figures`): a GLUE task fine-tuned in a run and by `lmpt-finetune task=glue` records the same figures. A
suite's score is the mean of its tasks' scores (`suite_score`)."""

from __future__ import annotations

import statistics
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from lmpt.downstream.figures import GLUE_SCORE, METRICS, Metric

SCORED_SPLITS = {"dev": "", "test": "test_"}
"""A fine-tuning's scored splits and their figures' prefix: dev, and a second one (a test split, or MNLI's
mismatched dev set)."""


@dataclass(frozen=True)
class TaskMetric:
    """One of a task's own metrics: its name in the record, the metric of the table that computes it (the name's own
    when not given) and the scored split it reads."""

    name: str
    metric: str = ""
    split: str = "dev"
    """dev, or test: the fine-tuning's second scored split (MNLI's mismatched dev set)."""

    @property
    def computed_by(self) -> Metric:
        return METRICS[self.metric or self.name]

    @property
    def higher_is_better(self) -> bool:
        return self.computed_by.higher_is_better


def as_written(values: Sequence[float], classes: Sequence[str]) -> list:
    """Predictions as a task's files write labels: class names (class ids given), or numbers to predict as numbers
    (no classes)."""
    return [float(v) for v in values] if not classes else [classes[int(v)] for v in values]


def task_figures(
    metrics: Sequence[TaskMetric], gold: Mapping[str, Sequence], predicted: Mapping[str, Sequence]
) -> dict[str, float]:
    """Each metric's value from the gold labels and predictions (as the task's files write labels) by split."""
    return {m.name: m.computed_by(gold[m.split], predicted[m.split]) for m in metrics}


def official_figures(
    metrics: Sequence[TaskMetric],
    gold: Mapping[str, Sequence[str]],
    predicted: Mapping[str, Sequence[float]],
    classes: Sequence[str],
) -> dict[str, float]:
    """One model's figures of the task's own `metrics` and the task's score (GLUE_SCORE), from its predictions by
    figure prefix ("" dev, "test_" the second scored split, as a fine-tuning scores them; class ids, or numbers)
    against the gold labels as written by split ("dev", "test"); `classes`: the class of each class id (none for
    numbers). Nothing for a task without metrics of its own."""
    if not metrics:
        return {}
    splits = {m.split for m in metrics}
    written = {split: as_written(predicted[SCORED_SPLITS[split]], classes) for split in splits}
    figures = task_figures(metrics, {split: gold[split] for split in splits}, written)
    return {**figures, GLUE_SCORE: task_score(figures)}


def task_score(figures: Mapping[str, float]) -> float:
    """A task's score: the mean of its own metrics' figures (each one where higher is better)."""
    return statistics.fmean(figures.values())


def suite_score(scores: Mapping[str, float], left_out: Collection[str] = ()) -> float | None:
    """The mean of the task scores (by task), those `left_out` not counted; None when no task counts."""
    counted = [s for name, s in scores.items() if name not in left_out]
    return statistics.fmean(counted) if counted else None
