"""GLUE as data: its nine tasks in one table (`TASKS`, as lm-evaluation-harness's tasks/glue/*/default.yaml describe
them): each task's files (its folder, its Hugging Face config, its dev and test files), the columns that hold its texts
and label, its labels, and its official metrics, each one of lmpt's table of metrics, which knows which way is better
(lmpt.downstream.figures.METRICS): CoLA Matthews correlation; SST-2, QNLI, RTE, WNLI accuracy; MRPC and QQP F1 of the
positive class and accuracy; STS-B Pearson and Spearman correlation; MNLI accuracy on the matched and the mismatched
dev sets. A task's score is the mean of its official figures (lmpt.downstream.official); the GLUE score is the mean
of the task scores, WNLI left out unless asked for (as BERT reported it: every model then scored at most its majority
class). A GLUE-like suite is rows of such a table.

A task is named as GLUE's folder or Hugging Face's config, in any case (STS-B, sts-b, stsb); `task=glue` (all nine) or
`task=glue:rte,mrpc,sts-b` names some (`glue_tasks`), and GLUE is a source of tasks (`entries`): each one an entry,
glue:NAME@DIR, read by its kind as any task is (lmpt.downstream.glue_files reads its files). The test predictions go
into the files the GLUE server takes (`server_file`: NAME.tsv, MNLI-m.tsv, AX.tsv ...)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from lmpt.downstream.figures import ACCURACY, F1, MCC, PEARSON, SPEARMAN
from lmpt.downstream.official import SCORED_SPLITS, TaskMetric, suite_score, task_figures
from lmpt.errors import LmptError


@dataclass(frozen=True)
class GlueTask:
    """One GLUE task: where its files are, which columns hold its texts and label, and how it is scored."""

    name: str
    """GLUE's folder name (CoLA, SST-2 ...): the task's record name and its test file's name."""
    hf: str
    """The Hugging Face config (cola, sst2 ...)."""
    text: str | int
    pair: str | int | None
    label: str | int
    """Columns of the labelled splits: header names, or (CoLA, headerless) column numbers."""
    test_columns: tuple[str, str, str | None]
    """The test split's (index, text, pair) columns: its header names."""
    hf_columns: tuple[str, str | None]
    """The Hugging Face dataset's (text, pair) columns."""
    labels: tuple[str, ...]
    """The labels as GLUE's files write them (class order of the Hugging Face ClassLabel); () for STS-B's scores."""
    metrics: tuple[TaskMetric, ...]
    """The official metrics, the task's GLUE score their mean (each one where higher is better)."""
    dev_files: tuple[str, ...] = ("dev",)
    test_files: tuple[str, ...] = ("test",)
    server_files: tuple[str, ...] = ()
    """The names of the test-prediction files the GLUE server takes, one a test file (default: NAME.tsv)."""
    skip_bad_rows: bool = False
    """QQP: rows with missing columns are skipped, as GLUE's processor skips them."""

    @property
    def regression(self) -> bool:
        """Whether the task's labels are numbers to predict (STS-B)."""
        return not self.labels

    @property
    def columns(self) -> tuple[str | int, ...]:
        return tuple(c for c in (self.text, self.pair, self.label) if c is not None)


MATCHED, MISMATCHED = "matched_accuracy", "mismatched_accuracy"
_BINARY, _NLI2 = ("0", "1"), ("entailment", "not_entailment")
_ACCURACY, _F1_ACCURACY = (TaskMetric(ACCURACY),), (TaskMetric(F1), TaskMetric(ACCURACY))
_MNLI = (TaskMetric(MATCHED, ACCURACY, "dev"), TaskMetric(MISMATCHED, ACCURACY, "test"))
"""MNLI: accuracy on each dev file, the mismatched one scored as the fine-tuning's second split
(lmpt.downstream.glue_files.GlueSplits)."""
_PAIR_TEST = ("index", "sentence1", "sentence2")

TASKS: dict[str, GlueTask] = {
    t.hf: t
    for t in (
        GlueTask(
            "CoLA", "cola", 3, None, 1, ("index", "sentence", None), ("sentence", None), _BINARY, (TaskMetric(MCC),)
        ),
        GlueTask(
            "SST-2",
            "sst2",
            "sentence",
            None,
            "label",
            ("index", "sentence", None),
            ("sentence", None),
            _BINARY,
            _ACCURACY,
        ),
        GlueTask(
            "MRPC",
            "mrpc",
            "#1 String",
            "#2 String",
            "Quality",
            ("index", "#1 String", "#2 String"),
            ("sentence1", "sentence2"),
            _BINARY,
            _F1_ACCURACY,
        ),
        GlueTask(
            "QQP",
            "qqp",
            "question1",
            "question2",
            "is_duplicate",
            ("id", "question1", "question2"),
            ("question1", "question2"),
            _BINARY,
            _F1_ACCURACY,
            skip_bad_rows=True,
        ),
        GlueTask(
            "STS-B",
            "stsb",
            "sentence1",
            "sentence2",
            "score",
            _PAIR_TEST,
            ("sentence1", "sentence2"),
            (),
            (TaskMetric(PEARSON), TaskMetric(SPEARMAN)),
        ),
        GlueTask(
            "MNLI",
            "mnli",
            "sentence1",
            "sentence2",
            "gold_label",
            _PAIR_TEST,
            ("premise", "hypothesis"),
            ("entailment", "neutral", "contradiction"),
            _MNLI,
            ("dev_matched", "dev_mismatched"),
            ("test_matched", "test_mismatched"),
            ("MNLI-m.tsv", "MNLI-mm.tsv"),
        ),
        GlueTask(
            "QNLI",
            "qnli",
            "question",
            "sentence",
            "label",
            ("index", "question", "sentence"),
            ("question", "sentence"),
            _NLI2,
            _ACCURACY,
        ),
        GlueTask(
            "RTE", "rte", "sentence1", "sentence2", "label", _PAIR_TEST, ("sentence1", "sentence2"), _NLI2, _ACCURACY
        ),
        GlueTask(
            "WNLI",
            "wnli",
            "sentence1",
            "sentence2",
            "label",
            _PAIR_TEST,
            ("sentence1", "sentence2"),
            _BINARY,
            _ACCURACY,
        ),
    )
}
"""The nine tasks by Hugging Face config, in GLUE's order."""
DIAGNOSTIC = ("diagnostic/diagnostic.tsv", "ax", "AX.tsv")
"""The diagnostic set (its file in the download, its Hugging Face config, its server file): MNLI's model predicts it."""


def name_key(name: str) -> str:
    """A task's name as it is compared: any case, without - or _ (STS-B, sts_b, stsb)."""
    return name.lower().replace("-", "").replace("_", "")


def glue_task(name: str, key: str = "task") -> GlueTask:
    """The task `name` names (GLUE's folder or the Hugging Face config, any case); an unknown one is refused."""
    found = next((t for t in TASKS.values() if name_key(name) in (name_key(t.name), t.hf)), None)
    if found is None:
        known = ", ".join(t.name for t in TASKS.values())
        raise LmptError(f"{key}: GLUE has no task {name!r}: name one of {known} (any case, e.g. sts-b or stsb)")
    return found


def glue_tasks(names: str, key: str = "task") -> list[GlueTask]:
    """The tasks of `task=glue` (all nine) or `task=glue:rte,mrpc,sts-b` (those, in GLUE's order, each once)."""
    if not names.partition(":")[1]:
        return list(TASKS.values())
    listed = [glue_task(n.strip(), key) for n in names.partition(":")[2].split(",") if n.strip()]
    if not listed:
        raise LmptError(f"{key}={names} names no task: give {key}=glue (all nine) or e.g. {key}=glue:rte,mrpc,sts-b")
    twice = sorted({t.name for t in listed if listed.count(t) > 1})
    if twice:
        raise LmptError(f"{key}={names} names {', '.join(twice)} twice: name each task once")
    return [t for t in TASKS.values() if t in listed]


ENTRY_PREFIX = "glue:"
"""downstream.classification_tasks=[glue:rte@DIR]: one GLUE task of the folder DIR, fine-tuned as any other."""


def is_entry(task: str) -> bool:
    """Whether a downstream.classification_tasks entry names a GLUE task (glue:NAME@DIR)."""
    return task.lower().startswith(ENTRY_PREFIX)


def parse_entry(entry: str, key: str) -> tuple[GlueTask, str]:
    """(the task, its folder) of `key=glue:NAME@DIR`; an entry without a folder or of an unknown task is refused."""
    name, at, root = entry[len(ENTRY_PREFIX) :].partition("@")
    if not at or not root.strip() or "," in name:
        raise LmptError(f"{key}={entry} names no GLUE folder: write glue:NAME@DIR (one task, e.g. glue:rte@glue_data)")
    return glue_task(name.strip(), key), root.strip()


def entries(names: str, root: str, key: str = "task") -> list[str]:
    """GLUE as a source of tasks: the entry (glue:NAME@DIR, read as any other task by its kind) of each task
    `task=glue` (all nine) or `task=glue:rte,mrpc,sts-b` names, in GLUE's order, its files in the folder `root`."""
    return [f"{ENTRY_PREFIX}{task.hf}@{root}" for task in glue_tasks(names, key)]


def entry_is_regression(entry: str) -> bool:
    """Whether `entry` (glue:NAME@DIR) names a task scored by correlation (STS-B); False for any other, or one that
    does not parse (refused by whoever reads it, naming its key)."""
    try:
        return parse_entry(entry, "task")[0].regression
    except LmptError:
        return False


def server_file(task: GlueTask, test: str) -> str:
    """The name of the GLUE server's file of `task`'s test file `test` (AX.tsv for the diagnostic set)."""
    if test == DIAGNOSTIC[1]:
        return DIAGNOSTIC[2]
    return task.server_files[task.test_files.index(test)] if task.server_files else f"{task.name}.tsv"


WNLI = "wnli"
"""Left out of the GLUE score unless asked for, as BERT reported it: every model scored at most its majority class."""


def task_metrics(task: GlueTask, gold: Mapping[str, Sequence], predicted: Mapping[str, Sequence]) -> dict[str, float]:
    """The official figures of `task` from each dev file's gold labels and predictions (labels as GLUE's files write
    them; STS-B's as numbers), by dev file name (MNLI: dev_matched and dev_mismatched, the others dev): what its dev
    predictions file (lmpt.downstream.glue_suite) gives back."""
    splits = dict(zip(SCORED_SPLITS, task.dev_files, strict=False))
    return task_figures(
        task.metrics, {s: gold[f] for s, f in splits.items()}, {s: predicted[f] for s, f in splits.items()}
    )


def glue_score(scores: dict[str, float], with_wnli: bool = False) -> float | None:
    """The mean of the task scores (by Hugging Face config), WNLI's counted only `with_wnli`; None when no task
    counts."""
    return suite_score(scores, () if with_wnli else (WNLI,))
