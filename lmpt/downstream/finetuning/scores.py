"""Classification figures (accuracy, macro-F1, Matthews correlation for two classes: lmpt.downstream.metrics) and
their mean and sample standard deviation over fine-tuning seeds."""

from __future__ import annotations

import statistics

import torch

from lmpt.downstream.figures import ACCURACY, MACRO_F1, MCC, mean_of, std_of
from lmpt.downstream.figures import SEED_FIGURES as FIGURES
from lmpt.downstream.metrics import METRICS, macro_f1


def classification_scores(gold: torch.Tensor, predicted: torch.Tensor, n_classes: int, prefix: str = "") -> dict:
    """Accuracy and macro-F1 over every class of the task (a class never predicted counts as F1 0), and Matthews
    correlation when the task has two classes, keyed `prefix + name`."""
    y_true, y_pred = gold.tolist(), predicted.tolist()
    scores = {ACCURACY: METRICS[ACCURACY](y_true, y_pred), MACRO_F1: macro_f1(y_true, y_pred, list(range(n_classes)))}
    if n_classes == 2:
        scores[MCC] = METRICS[MCC](y_true, y_pred)
    return {prefix + name: value for name, value in scores.items()}


def mean_and_std(per_seed: list[dict]) -> dict:
    """`NAME_mean` and `NAME_std` of every figure the seeds report: the sample standard deviation (ddof=1, the
    spread a new seed would show), None with one seed."""
    summary: dict = {}
    for name in per_seed[0]:
        if name == "seed" or not any(name.endswith(f) for f in FIGURES):
            continue
        values = [run[name] for run in per_seed]
        summary[mean_of(name)] = statistics.fmean(values)
        summary[std_of(name)] = statistics.stdev(values) if len(values) > 1 else None
    return summary
