"""GLUE's tasks read as they ship (`read_glue`), without any field mapped by hand, from either:

- the folder GLUE's download script writes: DIR/TASK/{train,dev,test}.tsv (MNLI: dev_matched, dev_mismatched,
  test_matched, test_mismatched; the diagnostic set DIR/diagnostic/diagnostic.tsv, predicted by MNLI's model), each
  read as GLUE's own processors read it (tab-separated, no quoting): CoLA's train and dev have no header, QQP's
  malformed rows are skipped, every other file's header names its columns;
- a folder of Hugging Face `save_to_disk` copies of nyu-mll/glue, one a config: DIR/cola, DIR/sst2, ... (read offline
  by `datasets`, imported only then).

Every problem (an unknown name, a missing file, a file whose columns are not the task's, a label that is not the
task's) is one LmptError naming the file and what to do, raised before any training. A task read as a fine-tuning
reads it (`glue_labelled`, or `GlueSource` for a glue:NAME@DIR entry) carries its official metrics (lmpt.downstream
.glue) and its test files, only predicted, so a fine-tuning computes its official figures and score as it computes any
task's own: in a run (downstream.tasks=[glue:NAME@DIR]) and by `lmpt-finetune task=glue` alike. The test predictions
are written as the GLUE server takes them (`write_server_file`: `index<TAB>prediction`)."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lmpt.downstream.glue import DIAGNOSTIC, GlueTask, name_key
from lmpt.downstream.labelled import LabelledTask, Unlabelled
from lmpt.downstream.labelled_files import MAX_ROW_CHARS, Example, number_label
from lmpt.downstream.official import SCORED_SPLITS
from lmpt.errors import LmptError
from lmpt.safe_files import write_atomically

if TYPE_CHECKING:
    from datasets import Dataset


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
        folder = next((p for p in base.iterdir() if p.is_dir() and name_key(p.name) == name_key(task.name)), folder)
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


def write_server_file(path: Path, indices: Sequence[str], predictions: Sequence[str]) -> None:
    """A test split's predictions as the GLUE server takes them: a header, then `index<TAB>prediction` a line."""
    lines = ["index\tprediction", *(f"{i}\t{p}" for i, p in zip(indices, predictions, strict=True))]
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, lambda tmp: tmp.write_text("\n".join(lines) + "\n", encoding="utf-8"))
