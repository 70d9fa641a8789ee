"""The names of the downstream figures, defined once: what the downstream commands write into their JSON and into
metrics.jsonl (`downstream/TASK/FIGURE`, lmpt.downstream.run_tasks), and what lmpt-report ranks and shows.
Plain strings, so a report reads them without loading torch.

Beside the names, the one table of downstream metrics (`METRICS`): each figure's name to how it is computed from gold
labels and predictions, by scikit-learn and scipy, and which way is better (`Metric`). Classification's figures,
regression's and GLUE's official ones all read it, so a figure of one name is computed one way everywhere; a
fine-tuning's figures are summed up over its seeds here too (`mean_and_std`).

Undefined values are never written as NaN: Matthews correlation with one class among gold and predicted is 0 (as
scikit-learn returns it), and a correlation where either side is constant is 0 (a head that predicts one number has
learned no ordering)."""

from __future__ import annotations

import statistics
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch


ACCURACY = "accuracy"
"""Share of questions (zero-shot) or dev examples (fine-tuned) answered right."""
EQUAL_LENGTH_ACCURACY = f"{ACCURACY}_equal_length"
"""Minimal pairs: accuracy on the pairs whose two sentences have equal token counts (where length cannot decide)."""
EQUAL_LENGTH_PAIRS = "equal_length_pairs"
"""Minimal pairs: the record's key of which pairs have sentences of equal token count, one character a pair, "1"
equal."""
ACCURACY_NORM = "accuracy_norm"
"""Zero-shot multiple choice: the highest score per UTF-8 byte of the choice (lm_eval's acc_bytes)."""
CHANCE = "chance"
"""Zero-shot multiple choice: the mean of 1 / number of choices."""
MACRO_F1 = "macro_f1"
MCC = "mcc"
"""Matthews correlation (two-class tasks only)."""
MAJORITY_ACCURACY = "majority_accuracy"
"""Fine-tuning: dev accuracy of always answering the training split's most common class."""
PEARSON = "pearson"
"""Regression: Pearson correlation of the predicted and gold scores (0 when either is constant)."""
SPEARMAN = "spearman"
"""Regression: Spearman rank correlation of the predicted and gold scores (0 when either is constant)."""
MSE = "mse"
"""Regression: mean squared error of the predicted scores (lower is better)."""
MEAN_BASELINE_MSE = "mean_baseline_mse"
"""Regression: dev mean squared error of always predicting the training split's mean score."""
F1 = "f1"
"""GLUE's MRPC and QQP: F1 of the positive class (1)."""
GLUE_SCORE = "glue_score"
"""A GLUE task fine-tuned: the task's score, the mean of its official figures (lmpt.downstream.glue)."""


def mean_of(figure: str) -> str:
    """The key of a figure's mean over fine-tuning seeds."""
    return f"{figure}_mean"


def std_of(figure: str) -> str:
    """The key of a figure's sample standard deviation over fine-tuning seeds."""
    return f"{figure}_std"


ACCURACY_MEAN, ACCURACY_STD, MACRO_F1_MEAN = mean_of(ACCURACY), std_of(ACCURACY), mean_of(MACRO_F1)

SEED_FIGURES = (ACCURACY, MACRO_F1, MCC, PEARSON, SPEARMAN, MSE, F1, GLUE_SCORE)
"""What each fine-tuning seed reports, in table order: a classification the first three (mcc only for two-class
tasks), a regression the next three, and a GLUE task its official figures (f1, matched_accuracy ...) and its score."""
CHOICE_FIGURES = (ACCURACY, ACCURACY_NORM, CHANCE)
"""The zero-shot multiple-choice figures logged after training."""
SCRATCH = "scratch"
"""control=scratch: the record's section of the freshly initialised control's figures."""
BAG_OF_WORDS = "bag_of_words"
"""Fine-tuning with control=scratch: the record's section of the bag-of-words floor's figures."""
UNLABELLED = "unlabelled"
"""A fine-tuning's predictions of its unlabelled examples (GLUE's test files), kept beside its scored splits."""
GAIN = "gain"
"""control=scratch: the record's section of the gains over the control, by figure."""
SCRATCH_ACCURACY_MEAN = f"{SCRATCH}_{ACCURACY_MEAN}"
"""Dev accuracy of the scratch control, mean over seeds."""
ACCURACY_GAIN = f"{ACCURACY}_{GAIN}"
"""Accuracy of the pre-trained model less its scratch control's (fine-tuned: dev, means over the same seeds;
zero-shot: on the same items)."""
SCRATCH_ACCURACY = f"{SCRATCH}_{ACCURACY}"
"""Zero-shot with control=scratch: the untrained control's accuracy on the same items."""
BOW_ACCURACY = f"bow_{ACCURACY}"
"""Dev accuracy of the bag-of-words floor."""
CLASSIFICATION_FIGURES = (ACCURACY_MEAN, ACCURACY_STD, MACRO_F1_MEAN, MAJORITY_ACCURACY)
"""The fine-tuning figures logged after training."""
PEARSON_MEAN, SPEARMAN_MEAN, MSE_MEAN = mean_of(PEARSON), mean_of(SPEARMAN), mean_of(MSE)
REGRESSION_FIGURES = (PEARSON_MEAN, std_of(PEARSON), SPEARMAN_MEAN, MSE_MEAN, MEAN_BASELINE_MSE)
"""The regression figures logged after training."""
MSE_GAIN = f"{MSE}_{GAIN}"
"""Regression with a scratch control: the control's dev MSE less the model's (positive: the model predicts better)."""
GLUE_SCORE_MEAN = mean_of(GLUE_SCORE)
"""A GLUE task's official score, mean over seeds: what a table of runs with a GLUE task ranks by."""
GLUE_METRICS = "glue_metrics"
"""A GLUE task's fine-tuning record: the names of its official figures (each seed's, their `_mean` over seeds)."""
REGRESSION_CONTROL_FIGURES = (f"{SCRATCH}_{PEARSON_MEAN}", MSE_GAIN, f"bow_{PEARSON}")
"""Logged after training beside REGRESSION_FIGURES when the fine-tuning had a scratch control."""
CONTROL_FIGURES = (SCRATCH_ACCURACY_MEAN, ACCURACY_GAIN, BOW_ACCURACY)
"""Logged after training beside CLASSIFICATION_FIGURES when the fine-tuning had a scratch control."""
ZERO_SHOT_CONTROL_FIGURES = (SCRATCH_ACCURACY, ACCURACY_GAIN)
"""Logged after training beside a zero-shot task's figures when it had a scratch control."""
EQUAL_LENGTH = "equal_length"
LENGTH_BASELINE = "length_baseline"
TIES = "ties"
"""Pairs whose two sentences scored the same: counted wrong, and counted here (records before it hold no count)."""
PAIR_FIGURES = (ACCURACY, EQUAL_LENGTH_ACCURACY, CHANCE, LENGTH_BASELINE)
"""The minimal-pair figures logged after training (lmpt.downstream.kinds.pairs)."""


METRIC_PREFIX = "downstream/"
"""Every downstream figure in metrics.jsonl is `downstream/TASK/FIGURE`."""


def metric_key(task: str, figure: str) -> str:
    """`downstream/TASK/FIGURE`: the figure's key in metrics.jsonl."""
    return f"{METRIC_PREFIX}{task}/{figure}"


def task_figure(key: str) -> str:
    """`TASK/FIGURE` of a metrics.jsonl key (a report column's title)."""
    return key.removeprefix(METRIC_PREFIX)


CURVE_PREFIX = "curve/"
"""A figure taken during training on a task's fast subset (downstream.score_every, lmpt.downstream.run_tasks) is
`curve/TASK/FIGURE`: never a `downstream/` key, so it never ranks runs."""


def curve_key(task: str, figure: str) -> str:
    """`curve/TASK/FIGURE`: a curve point's key in metrics.jsonl."""
    return f"{CURVE_PREFIX}{task}/{figure}"


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


@dataclass(frozen=True)
class Metric:
    """A figure computed from gold labels and predictions, and which way is better (as lm-evaluation-harness
    registers a metric with `higher_is_better`)."""

    compute: Callable[[Labels, Labels], float]
    higher_is_better: bool = True

    def __call__(self, gold: Labels, predicted: Labels) -> float:
        return self.compute(gold, predicted)


METRICS: dict[str, Metric] = {
    ACCURACY: Metric(accuracy),
    MACRO_F1: Metric(macro_f1),
    F1: Metric(positive_f1),
    MCC: Metric(mcc),
    PEARSON: Metric(_correlation(PEARSON)),
    SPEARMAN: Metric(_correlation(SPEARMAN)),
    MSE: Metric(mse, higher_is_better=False),
}
"""Figure name -> the metric computing it from (gold, predicted), and its direction."""


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
        if name == "seed" or not any(name.endswith(f) for f in SEED_FIGURES):
            continue
        values = [run[name] for run in per_seed]
        summary[mean_of(name)] = statistics.fmean(values)
        summary[std_of(name)] = statistics.stdev(values) if len(values) > 1 else None
    return summary
