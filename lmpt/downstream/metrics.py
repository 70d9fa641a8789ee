"""The one table of downstream metrics (`METRICS`): each figure's name (lmpt.downstream.figures) to how it is
computed from gold labels and predictions, by scikit-learn and scipy. Classification's figures, regression's and
GLUE's official ones all read it, so a figure of one name is computed one way everywhere; a fine-tuning's figures
are summed up over its seeds here too (`mean_and_std`).

Undefined values are never written as NaN: Matthews correlation with one class among gold and predicted is 0 (as
scikit-learn returns it), and a correlation where either side is constant is 0 (a head that predicts one number has
learned no ordering)."""

from __future__ import annotations

import statistics
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from lmpt.downstream.figures import ACCURACY, F1, MACRO_F1, MCC, MSE, PEARSON, SPEARMAN, mean_of, std_of
from lmpt.downstream.figures import SEED_FIGURES as FIGURES

if TYPE_CHECKING:
    import torch

Labels = Sequence | np.ndarray
"""Gold labels or predictions: class ids, GLUE's label strings, or numbers."""


def accuracy(gold: Labels, predicted: Labels) -> float:
    from sklearn.metrics import accuracy_score  # 1-2 s to import: not for --help

    return float(accuracy_score(list(gold), list(predicted)))


def macro_f1(gold: Labels, predicted: Labels, classes: Sequence | None = None) -> float:
    """F1 averaged over `classes` (every class of the task: one never predicted counts 0), else over those seen."""
    from sklearn.metrics import f1_score

    return float(f1_score(list(gold), list(predicted), labels=classes, average="macro", zero_division=0.0))


def positive_f1(gold: Labels, predicted: Labels, positive: object = "1") -> float:
    """F1 of the `positive` class (GLUE's MRPC and QQP: the label "1")."""
    from sklearn.metrics import f1_score

    return float(f1_score(list(gold), list(predicted), pos_label=positive, zero_division=0.0))


def mcc(gold: Labels, predicted: Labels) -> float:
    from sklearn.metrics import matthews_corrcoef

    with warnings.catch_warnings():  # one class among gold and predicted: 0, as scikit-learn returns
        warnings.simplefilter("ignore")
        return float(matthews_corrcoef(list(gold), list(predicted)))


def _correlation(kind: str) -> Callable[[Labels, Labels], float]:
    def correlation(gold: Labels, predicted: Labels) -> float:
        from scipy.stats import pearsonr, spearmanr  # scipy on demand: --help needs none

        x, y = np.asarray(gold, dtype=np.float64), np.asarray(predicted, dtype=np.float64)
        if np.ptp(x) == 0 or np.ptp(y) == 0:
            return 0.0
        with warnings.catch_warnings():  # near-constant input: scipy warns, the figure stands
            warnings.simplefilter("ignore", RuntimeWarning)
            value = float((pearsonr if kind == PEARSON else spearmanr)(x, y)[0])
        return 0.0 if value != value else value  # NaN: undefined, never written

    return correlation


def mse(gold: Labels, predicted: Labels) -> float:
    x, y = np.asarray(gold, dtype=np.float64), np.asarray(predicted, dtype=np.float64)
    return float(np.mean((y - x) ** 2))


METRICS: dict[str, Callable[[Labels, Labels], float]] = {
    ACCURACY: accuracy,
    MACRO_F1: macro_f1,
    F1: positive_f1,
    MCC: mcc,
    PEARSON: _correlation(PEARSON),
    SPEARMAN: _correlation(SPEARMAN),
    MSE: mse,
}
"""Figure name -> its value from (gold, predicted)."""


def classification_scores(
    gold: torch.Tensor | np.ndarray, predicted: torch.Tensor | np.ndarray, n_classes: int, prefix: str = ""
) -> dict:
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
