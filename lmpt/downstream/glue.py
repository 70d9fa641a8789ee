"""GLUE's nine tasks as they ship, read without any field mapped by hand, from either:

- the folder GLUE's download script writes: DIR/TASK/{train,dev,test}.tsv (MNLI: dev_matched, dev_mismatched,
  test_matched, test_mismatched; the diagnostic set DIR/diagnostic/diagnostic.tsv, predicted by MNLI's model), each
  read as GLUE's own processors read it (tab-separated, no quoting): CoLA's train and dev have no header, QQP's
  malformed rows are skipped, every other file's header names its columns;
- a folder of Hugging Face `save_to_disk` copies of nyu-mll/glue, one a config: DIR/cola, DIR/sst2, ... (read offline
  by `datasets`, imported only then).

A task is named as GLUE's folder or Hugging Face's config, in any case (STS-B, sts-b, stsb). Every problem (an
unknown name, a missing file, a file whose columns are not the task's, a label that is not the task's) is one
LmptError naming the file and what to do, raised before any training.

GLUE is data: a table of its tasks (`TASKS`: each task's files, columns, labels and official metrics, as
lm-evaluation-harness's tasks/glue/*/default.yaml describe them), each metric one of lmpt's table, which knows which
way is better (lmpt.downstream.figures.METRICS). CoLA Matthews correlation; SST-2, QNLI, RTE, WNLI accuracy; MRPC and
QQP F1 of the positive class and accuracy; STS-B Pearson and Spearman correlation; MNLI accuracy on the matched and the
mismatched dev sets. A task read (`glue_labelled`, or `GlueSource` for a glue:NAME@DIR entry) carries its metrics and
its test files, only predicted, so a fine-tuning computes its official figures and score as it computes any task's
own (lmpt.downstream.official): in a run (downstream.tasks=[glue:NAME@DIR]) and by `lmpt-finetune task=glue` alike.
The GLUE score is the mean of the task scores, WNLI left out unless asked for (as BERT reported it: every model then
scored at most its majority class). The test predictions are written as the GLUE server takes them: NAME.tsv,
`index<TAB>prediction`. A GLUE-like suite whose files are read the same way is rows of such a table."""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lmpt.downstream.figures import ACCURACY, F1, MCC, PEARSON, SPEARMAN
from lmpt.downstream.official import SCORED_SPLITS, TaskMetric, suite_score, task_figures
from lmpt.downstream.sources import MAX_ROW_CHARS, Example, LabelledTask, Unlabelled, number_label
from lmpt.errors import LmptError
from lmpt.safe_files import write_atomically

if TYPE_CHECKING:
    from datasets import Dataset


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
"""MNLI: accuracy on each dev file, the mismatched one scored as the fine-tuning's second split (`GlueSplits`)."""
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
HF_SPLITS = {
    "train": "train",
    "dev": "validation",
    "dev_matched": "validation_matched",
    "dev_mismatched": "validation_mismatched",
    "test": "test",
    "test_matched": "test_matched",
    "test_mismatched": "test_mismatched",
}
"""The download's split names and the Hugging Face dataset's."""


def _key(name: str) -> str:
    return name.lower().replace("-", "").replace("_", "")


def glue_task(name: str, key: str = "task") -> GlueTask:
    """The task `name` names (GLUE's folder or the Hugging Face config, any case); an unknown one is refused."""
    found = next((t for t in TASKS.values() if _key(name) in (_key(t.name), t.hf)), None)
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


def glue_labelled(root: str, task: GlueTask) -> LabelledTask:
    """`task` of the folder `root` as a fine-tuning reads it: train, dev (its first dev file) and, for MNLI, the
    mismatched dev set as the scored "test" split, with its official metrics, and its test files (and MNLI's
    diagnostic set) only predicted."""
    splits = read_glue(root, task)
    named = {"train": f"data.dir={root} ({task.name})"}
    named |= {split: f"data.dir={root} ({task.name}, {split})" for split in SCORED_SPLITS}
    unlabelled = tuple(Unlabelled(name, indices, examples) for name, (indices, examples) in splits.tests.items())
    return LabelledTask(task.name, list(task.labels), splits.fine_tuned, task.metrics, unlabelled, named)


@dataclass(frozen=True)
class GlueSource:
    """A GLUE task of a folder (glue:NAME@DIR), as a fine-tuned task's source of examples."""

    root: str
    task: GlueTask
    key: str = "task"
    """What named the task: messages about reading its texts say so."""

    def read(self, numbers: bool = False) -> LabelledTask:
        """The task as a fine-tuning reads it (`glue_labelled`); GLUE's table says whether its labels are numbers."""
        return glue_labelled(self.root, self.task)

    def texts(self) -> list[str]:
        """Each dev and test example's texts."""
        examples = read_glue(self.root, self.task, self.key).fine_tuned
        return [" ".join(filter(None, (e.text, e.pair))) for s in SCORED_SPLITS for e in examples.get(s, [])]


@dataclass(frozen=True)
class GlueSplits:
    """One task read: its labelled splits ("train", then its dev files by name) and its unlabelled test files, each
    with their index column."""

    task: GlueTask
    labelled: dict[str, list[Example]]
    tests: dict[str, tuple[list[str], list[Example]]]
    """test file name -> (indices, examples), in the order of `task.test_files` (and the diagnostic set, for MNLI)."""

    @property
    def fine_tuned(self) -> dict[str, list[Example]]:
        """The splits as a fine-tuning scores them: train, dev (the first dev file) and, for MNLI, the mismatched
        dev set as its second scored split ("test")."""
        examples = {"train": self.labelled["train"], "dev": self.labelled[self.task.dev_files[0]]}
        if len(self.task.dev_files) > 1:
            examples["test"] = self.labelled[self.task.dev_files[1]]
        return examples


def is_hf_folder(folder: Path) -> bool:
    """Whether `folder` is a `save_to_disk` copy of a Hugging Face dataset (a DatasetDict)."""
    return (folder / "dataset_dict.json").is_file()


def read_glue(root: str, task: GlueTask, key: str = "data.dir") -> GlueSplits:
    """Every split of `task` under `root`: DIR/TASK/*.tsv, or DIR/CONFIG a `save_to_disk` folder."""
    base = Path(root).expanduser()
    if not base.is_dir():
        raise LmptError(f"{key}={root} is not a folder: give the folder GLUE's download script writes (DIR/TASK/)")
    if is_hf_folder(base / task.hf):
        return _read_hf(base, task)
    folder = base / task.name
    if not folder.is_dir():
        folder = next((p for p in base.iterdir() if p.is_dir() and _key(p.name) == _key(task.name)), folder)
    labelled = {"train": _read_tsv(folder / "train.tsv", task, labelled=True)}
    labelled |= {dev: _read_tsv(folder / f"{dev}.tsv", task, labelled=True) for dev in task.dev_files}
    tests = {
        name: _read_test(folder / f"{name}.tsv", task) for name in task.test_files if (folder / f"{name}.tsv").is_file()
    }
    diagnostic = base / DIAGNOSTIC[0]
    if task.hf == "mnli" and diagnostic.is_file():
        tests[DIAGNOSTIC[1]] = _read_test(diagnostic, task)
    return GlueSplits(task, labelled, tests)


def _rows(path: Path) -> list[tuple[int, list[str]]]:
    """(line number, columns) of every non-empty row of a GLUE .tsv, read as GLUE's processors read it."""
    if not path.is_file():
        raise LmptError(
            f"{path} is missing: a GLUE folder holds TASK/train.tsv, dev.tsv (MNLI: dev_matched.tsv and "
            "dev_mismatched.tsv) and test.tsv, as GLUE's download script writes them"
        )
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as e:
        raise LmptError(f"{path} cannot be read as UTF-8 text ({e}): download the task again") from None
    reader = csv.reader(io.StringIO(text, newline=""), delimiter="\t", quoting=csv.QUOTE_NONE)
    rows = []
    try:
        for row in reader:
            if sum(map(len, row)) > MAX_ROW_CHARS:
                raise LmptError(f"{path}:{reader.line_num} is too long to be one example: check the file")
            if row:
                rows.append((reader.line_num, row))
    except csv.Error as e:  # a field over csv's field_size_limit
        raise LmptError(f"{path}:{reader.line_num} cannot be read as one example ({e}): check that line") from None
    return rows


def _not_its_columns(path: Path, task: GlueTask, found: list[str], wanted: list[str]) -> LmptError:
    return LmptError(
        f"{path}: its columns ({', '.join(found[:8]) or 'none'}) are not {task.name}'s (it needs "
        f"{', '.join(map(str, wanted))}): give the folder GLUE's download script writes"
    )


STSB_RANGE = (0.0, 5.0)
"""STS-B's similarity scores: 0 (unrelated) to 5 (the same meaning)."""


def _score(where: str, value: object, field: str) -> str:
    """An STS-B score as written, once it is a number from 0 to 5; anything else refused naming `where`."""
    label = number_label(where, value, field, "the file is not STS-B's, or that line is damaged: download it again")
    low, high = STSB_RANGE
    if not low <= float(label) <= high:
        raise LmptError(
            f"{where}: score {label} is outside STS-B's {low:g} to {high:g}: the file is not STS-B's, or that line "
            "is damaged (download the task again)"
        )
    return label


def _label(path: Path, line: int, value: str, task: GlueTask) -> str:
    if task.regression:
        return _score(f"{path}:{line}", value, str(task.label))
    if value.strip() not in task.labels:
        raise LmptError(
            f"{path}:{line}: label {value!r} is not one of {task.name}'s ({', '.join(task.labels)}): the file's "
            "columns are not that task's"
        )
    return value.strip()


def _read_tsv(path: Path, task: GlueTask, labelled: bool) -> list[Example]:
    rows = _rows(path)
    if isinstance(task.label, int):  # CoLA: no header, columns by number
        width = max(int(c) for c in task.columns) + 1
        index: dict[str | int, int] = {c: int(c) for c in task.columns}
    else:
        header = rows.pop(0)[1] if rows else []
        missing = [c for c in task.columns if c not in header]
        if missing:
            raise _not_its_columns(path, task, header, [str(c) for c in task.columns])
        width, index = len(header), {c: header.index(str(c)) for c in task.columns}
    examples = []
    for line, row in rows:
        if len(row) < width and not isinstance(task.label, int) and task.skip_bad_rows:
            continue  # QQP's broken rows: GLUE's processor skips them too
        if len(row) <= max(index.values()):
            raise LmptError(f"{path}:{line} has {len(row)} columns where {task.name} has {width}: fix that line")
        pair = row[index[task.pair]] if task.pair is not None else None
        examples.append(Example(row[index[task.text]], pair, _label(path, line, row[index[task.label]], task)))
    if not examples:
        raise LmptError(f"{path} holds no examples: download the task again")
    return examples


def _read_test(path: Path, task: GlueTask) -> tuple[list[str], list[Example]]:
    rows = _rows(path)
    header = rows.pop(0)[1] if rows else []
    wanted = [c for c in task.test_columns if c is not None]
    if any(c not in header for c in wanted):
        raise _not_its_columns(path, task, header, wanted)
    at = [header.index(c) for c in wanted]
    indices, examples = [], []
    for line, row in rows:
        if len(row) <= max(at):
            if task.skip_bad_rows:
                continue
            raise LmptError(f"{path}:{line} has {len(row)} columns where {task.name}'s test has {len(header)}")
        indices.append(row[at[0]])
        examples.append(Example(row[at[1]], row[at[2]] if len(at) > 2 else None, ""))
    return indices, examples


def _read_hf(base: Path, task: GlueTask) -> GlueSplits:
    """A `save_to_disk` copy of nyu-mll/glue's config `task.hf` (and `ax`, for MNLI's diagnostic predictions)."""
    from lmpt.config.errors import require_extra

    require_extra("datasets", "reading GLUE from a Hugging Face save_to_disk folder")
    import datasets

    def load(folder: Path) -> Any:
        try:
            return datasets.load_from_disk(str(folder))
        except (OSError, ValueError, FileNotFoundError) as e:
            raise LmptError(f"{folder} is not a readable save_to_disk folder ({e}): save the dataset again") from None

    found = load(base / task.hf)
    where = base / task.hf

    def split(name: str) -> Any:
        hf = HF_SPLITS[name]
        if hf not in found:
            raise LmptError(f"{where} has no {hf} split (it has {', '.join(found)}): save nyu-mll/glue's {task.hf}")
        data = found[hf]
        wanted = [c for c in (*task.hf_columns, "label", "idx") if c is not None]
        if any(c not in data.column_names for c in wanted):
            raise _not_its_columns(where / hf, task, data.column_names, wanted)
        return data

    def examples(data: Dataset, labelled: bool, hf_split: str) -> list[Example]:
        text, pair = task.hf_columns
        at = where / hf_split
        names = getattr(data.features["label"], "names", None)
        out = []
        for i, row in enumerate(data):
            label = ""
            if labelled:
                value = row["label"]
                if task.regression:
                    label = _score(f"{at} row {i}", value, "label")
                elif names and not 0 <= int(value) < len(task.labels):
                    raise LmptError(
                        f"{at} row {i}: label {value} is not one of {task.name}'s {len(task.labels)} classes "
                        f"(0 to {len(task.labels) - 1}; -1 marks an unlabelled test row): its train and validation "
                        "splits must be labelled, save nyu-mll/glue's own"
                    )
                else:
                    label = _label(at, i, task.labels[int(value)] if names else str(value), task)
            out.append(Example(row[text], row[pair] if pair else None, label))
        return out

    labelled = {name: examples(split(name), True, HF_SPLITS[name]) for name in ("train", *task.dev_files)}
    tests = {}
    for name in task.test_files:
        if HF_SPLITS[name] in found:
            data = split(name)
            tests[name] = ([str(i) for i in data["idx"]], examples(data, False, HF_SPLITS[name]))
    if task.hf == "mnli" and is_hf_folder(base / DIAGNOSTIC[1]):
        ax = load(base / DIAGNOSTIC[1])["test"]
        tests[DIAGNOSTIC[1]] = ([str(i) for i in ax["idx"]], [Example(r["premise"], r["hypothesis"], "") for r in ax])
    return GlueSplits(task, labelled, tests)


def server_file(task: GlueTask, test: str) -> str:
    """The name of the GLUE server's file of `task`'s test file `test` (AX.tsv for the diagnostic set)."""
    if test == DIAGNOSTIC[1]:
        return DIAGNOSTIC[2]
    return task.server_files[task.test_files.index(test)] if task.server_files else f"{task.name}.tsv"


WNLI = "wnli"
"""Left out of the GLUE score unless asked for, as BERT reported it: every model scored at most its majority class."""
SPLIT_PREFIXES = tuple(SCORED_SPLITS.values())
"""A fine-tuning's figure prefixes of a task's first and second dev file (MNLI's matched and mismatched)."""


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


def write_server_file(path: Path, indices: Sequence[str], predictions: Sequence[str]) -> None:
    """A test split's predictions as the GLUE server takes them: a header, then `index<TAB>prediction` a line."""
    lines = ["index\tprediction", *(f"{i}\t{p}" for i, p in zip(indices, predictions, strict=True))]
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, lambda tmp: tmp.write_text("\n".join(lines) + "\n", encoding="utf-8"))
