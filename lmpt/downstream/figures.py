"""The names of the downstream figures, defined once: what the downstream commands write into their JSON and into
metrics.jsonl (`downstream/TASK/FIGURE`, lmpt.downstream.after_training), and what lmpt-report ranks and shows.
Plain strings with no imports, so a report reads them without loading torch."""

from __future__ import annotations

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
"""A GLUE task fine-tuned: the task's score, the mean of its official figures (lmpt.downstream.tasks.glue)."""


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

METRIC_PREFIX = "downstream/"
"""Every downstream figure in metrics.jsonl is `downstream/TASK/FIGURE`."""


def metric_key(task: str, figure: str) -> str:
    """`downstream/TASK/FIGURE`: the figure's key in metrics.jsonl."""
    return f"{METRIC_PREFIX}{task}/{figure}"


def task_figure(key: str) -> str:
    """`TASK/FIGURE` of a metrics.jsonl key (a report column's title)."""
    return key.removeprefix(METRIC_PREFIX)


CURVE_PREFIX = "curve/"
"""A figure taken during training on a task's fast subset (downstream.score_every, lmpt.downstream.curves) is
`curve/TASK/FIGURE`: never a `downstream/` key, so it never ranks runs."""


def curve_key(task: str, figure: str) -> str:
    """`curve/TASK/FIGURE`: a curve point's key in metrics.jsonl."""
    return f"{CURVE_PREFIX}{task}/{figure}"
