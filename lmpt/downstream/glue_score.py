"""GLUE's official figures and score, computed from predictions (what `lmpt-finetune RUN task=glue` keeps beside its
record, so anyone can compute them again): CoLA Matthews correlation; SST-2, QNLI, RTE, WNLI accuracy; MRPC and QQP
F1 of the positive class and accuracy; STS-B Pearson and Spearman correlation; MNLI accuracy on the matched and the
mismatched dev sets (scikit-learn and scipy). A task's score is the mean of its figures; the GLUE score is the mean
of the task scores, WNLI left out unless asked for (as BERT reported it: every model then scored at most its majority
class). The test predictions are written as the GLUE server takes them: NAME.tsv, `index<TAB>prediction`.
`official_figures` gives one fine-tuning seed's figures and score from its predictions, so a GLUE task fine-tuned in a
run (downstream.classification_tasks=[glue:NAME@DIR]) records and ranks by them as `task=glue` does."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path

from lmpt.downstream.figures import ACCURACY, GLUE_SCORE
from lmpt.downstream.metrics import METRICS
from lmpt.downstream.tasks.glue import GlueTask
from lmpt.downstream.tasks.task_files import Example
from lmpt.safe_files import write_atomically

WNLI = "wnli"
SPLIT_PREFIXES = ("", "test_")
"""A fine-tuning's figure prefixes of a task's first and second dev file (MNLI's matched and mismatched)."""
SCORED_SPLITS = ("dev", "test")
"""A fine-tuning's split names of a task's first and second dev file (lmpt.downstream.tasks.glue.GlueSplits)."""


def as_written(values: Sequence[float], classes: Sequence[str]) -> list:
    """Predictions as GLUE's files write labels: class names (class ids given), or STS-B's scores as numbers (no
    classes)."""
    return [float(v) for v in values] if not classes else [classes[int(v)] for v in values]


def task_metrics(task: GlueTask, gold: Mapping[str, Sequence], predicted: Mapping[str, Sequence]) -> dict[str, float]:
    """The official figures of `task` from each dev file's gold labels and predictions (labels as GLUE's files write
    them; STS-B's as numbers), by dev file name (MNLI: dev_matched and dev_mismatched, the others dev)."""
    dev = task.dev_files[0]
    figures: dict[str, float] = {}
    for metric in task.metrics:
        if metric in METRICS:  # accuracy, f1 (of the label "1"), mcc, pearson, spearman on the first dev file
            figures[metric] = METRICS[metric](gold[dev], predicted[dev])
        else:  # MNLI: accuracy on each dev file
            name = task.dev_files[task.metrics.index(metric)]
            figures[metric] = METRICS[ACCURACY](gold[name], predicted[name])
    return figures


def official_figures(
    task: GlueTask, examples: dict[str, list[Example]], predicted: Mapping[str, Sequence[float]], classes: Sequence[str]
) -> dict[str, float]:
    """One model's official figures of `task` (`task_metrics`) and the task's score (GLUE_SCORE), from its predictions
    by figure prefix ("" the first dev file, "test_" MNLI's mismatched one: as a fine-tuning scores them) against the
    gold labels of `examples` (by split: "dev", "test"); `classes`: the class of each class id (none for STS-B)."""
    files = dict(zip(SPLIT_PREFIXES, task.dev_files, strict=False))
    splits = dict(zip(SPLIT_PREFIXES, SCORED_SPLITS, strict=True))
    gold = {name: [e.label for e in examples[splits[prefix]]] for prefix, name in files.items()}
    written = {name: as_written(predicted[prefix], classes) for prefix, name in files.items()}
    figures = task_metrics(task, gold, written)
    return {**figures, GLUE_SCORE: task_score(figures)}


def task_score(figures: dict[str, float]) -> float:
    """A task's GLUE score: the mean of its official figures."""
    return statistics.fmean(figures.values())


def glue_score(scores: dict[str, float], with_wnli: bool = False) -> float | None:
    """The mean of the task scores (by Hugging Face config), WNLI's counted only `with_wnli`; None when no task
    counts."""
    counted = [s for name, s in scores.items() if with_wnli or name != WNLI]
    return statistics.fmean(counted) if counted else None


def write_server_file(path: Path, indices: Sequence[str], predictions: Sequence[str]) -> None:
    """A test split's predictions as the GLUE server takes them: a header, then `index<TAB>prediction` a line."""
    lines = ["index\tprediction", *(f"{i}\t{p}" for i, p in zip(indices, predictions, strict=True))]
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, lambda tmp: tmp.write_text("\n".join(lines) + "\n", encoding="utf-8"))
