"""Labelled examples from local task files (`read_examples`): JSON Lines, CSV and TSV (each plain, .gz or .zst,
streamed by lmpt.data.readers.streams) and parquet, where `TaskData` (lmpt-finetune's `data.*`) says the files are and
which fields hold the text, the second text of a pair and the label. TSV is read as GLUE's own processors read it (csv
module, tab delimiter, QUOTE_NONE), so GLUE's files work as they ship: SST-2 (`sentence`, `label`), MRPC (`#1 String`,
`#2 String`, `Quality`), RTE (`sentence1`, `sentence2`, string labels) and CoLA (no header: `data.text_field=3
data.label_field=1`). A regression's labels are read as numbers (`number_label`). Every problem is one LmptError naming
the file (and line) and what to do."""

from __future__ import annotations

import csv
import io
import itertools
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, cast

from lmpt.data.readers.jsonl import jsonl_records, shown
from lmpt.data.readers.streams import compression_of, open_bytes
from lmpt.errors import LmptError

FORMATS = (".jsonl", ".csv", ".tsv", ".parquet")
MAX_ROW_CHARS = 1 << 20
"""A csv/tsv line longer than this is refused before it is held (a file without line breaks, a wrong delimiter)."""
HEADER_WORDS = frozenset({"label", "labels", "class", "category", "target", "gold", "gold_label", "quality", "y"})
"""Column names a label column is often given: a first row labelled so is a header, not an example."""


@dataclass(frozen=True)
class Example:
    """One labelled example: its text, the second text of a pair task (or None) and its label as written."""

    text: str
    pair: str | None
    label: str


@dataclass
class TaskData:
    """Where a labelled task lives and which fields hold its text and labels."""

    train: str | None = None
    """Training examples: a .jsonl, .csv, .tsv (each also .gz/.zst) or .parquet file (required unless
    task=bundled:NAME)."""
    dev: str | None = None
    """Development examples, scored after each seed's fine-tuning (the headline figures; required unless
    task=bundled:NAME)."""
    test: str | None = None
    """Optional test examples, scored the same way (test_* figures)."""
    text_field: str = "text"
    """Field (or column name, or 0-based column number of a headerless csv/tsv) holding the text."""
    pair_field: str | None = None
    """Field holding the second text of a sentence-pair task (MRPC, RTE); null = single-text task."""
    label_field: str = "label"
    """Field holding the label: integers or strings, mapped to classes in sorted order of the training labels (with
    regression=true: a number to predict)."""
    header: bool | None = None
    """csv/tsv: whether the first row names the columns; null = yes unless every field given is a column number."""
    dir: str | None = None
    """task=glue: the folder GLUE's download script writes (DIR/TASK/train.tsv ...), or a folder of Hugging Face
    save_to_disk copies of nyu-mll/glue (DIR/rte, DIR/stsb ...)."""


def task_format(path: Path) -> str:
    """ ".jsonl", ".csv", ".tsv" or ".parquet" from the file name (a .gz/.zst ending is looked through)."""
    name = path.name.lower()
    name = name[: len(name) - len(compression_of(path))]
    fmt = next((f for f in FORMATS if name.endswith(f)), None)
    if fmt is None or (fmt == ".parquet" and compression_of(path)):
        raise LmptError(f"{path}: cannot tell its format: name it .jsonl, .csv, .tsv (plain, .gz or .zst) or .parquet")
    return fmt


def read_examples(path: str, role: str, data: TaskData, numbers: bool = False) -> list[Example]:
    """Every example of the `role` split (train, dev, test) at `path`; an empty split is refused. `numbers`: every
    label must be a finite number (a regression task's), refused naming its file and line otherwise."""
    file = Path(path).expanduser()
    if file.is_dir():
        raise LmptError(f"data.{role}={path} is a directory: give the task's {role} file inside it")
    if not file.is_file():
        raise LmptError(f"data.{role}={path} does not exist: give the task's {role} file")
    fmt = task_format(file)
    records = _parquet_records(file, data) if fmt == ".parquet" else _text_records(file, fmt, data)
    examples = [_example(file, where, record, data, numbers) for where, record in records]
    if not examples:
        raise LmptError(f"data.{role}={path} holds no examples: give a file with at least one labelled row")
    if fmt in (".csv", ".tsv") and data.header is None and not _has_header(data):
        _refuse_a_header_read_as_data(file, examples)
    return examples


def _has_header(data: TaskData) -> bool:
    """data.header, else yes unless every field given is a column number."""
    return data.header if data.header is not None else not all(f.isdecimal() for f in _fields(data))


def _refuse_a_header_read_as_data(path: Path, examples: list[Example]) -> None:
    """Column numbers make a file headerless; a first row whose label looks like a column name (a word such as
    'label' seen nowhere else, or the one non-integer label) is a header that would train as a class."""
    first, rest = examples[0].label, [e.label for e in examples[1:]]
    if first in rest or first.lstrip("-").isdecimal():
        return
    if first.lower() in HEADER_WORDS or (rest and all(label.lstrip("-").isdecimal() for label in rest)):
        raise LmptError(
            f"{path}:1 looks like a header (its label {first!r} is in no other row) but column numbers make the file "
            "headerless: set data.header=true to skip it (or data.header=false to keep it as an example)"
        )


def _fields(data: TaskData) -> list[str]:
    return [f for f in (data.text_field, data.pair_field, data.label_field) if f is not None]


def _lines(path: Path, text: io.TextIOBase) -> Iterator[str]:
    """The lines of `text`, each at most MAX_ROW_CHARS characters: a longer one is refused naming its number."""
    for lineno in itertools.count(1):
        line = text.readline(MAX_ROW_CHARS + 1)
        if not line:
            return
        if len(line) > MAX_ROW_CHARS:
            raise LmptError(
                f"{path}:{lineno} is longer than {MAX_ROW_CHARS:,} characters: one example is one line; check the "
                "file's line breaks and delimiter"
            )
        yield line


def _column_names(path: Path, names: list[str], data: TaskData) -> list[str]:
    """The header row; a field given by a name the header repeats is refused (which column would it be?)."""
    for wanted in _fields(data):
        columns = [i for i, name in enumerate(names) if name == wanted]
        if len(columns) > 1:
            raise LmptError(
                f"{path}:1 names the column '{wanted}' twice (columns {', '.join(map(str, columns))}): rename one, or "
                "give the column's number with data.header=true"
            )
    return names


def _text_records(path: Path, fmt: str, data: TaskData) -> Iterator[tuple[str, dict[str, Any]]]:
    if fmt == ".jsonl":
        yield from _jsonl_records(path)
        return
    with open_bytes(path) as raw:  # utf-8-sig: a byte-order mark is not part of the first column's name
        text = io.TextIOWrapper(cast(IO[bytes], raw), encoding="utf-8-sig", newline="")
        lines = _lines(path, text)
        reader = csv.reader(lines, delimiter="\t", quoting=csv.QUOTE_NONE) if fmt == ".tsv" else csv.reader(lines)
        try:
            names = _column_names(path, next(reader), data) if _has_header(data) else None
            for row in reader:
                if not row:
                    continue
                where = f"{path}:{reader.line_num}"
                if names is None:
                    yield where, {str(i): value for i, value in enumerate(row)}
                else:
                    yield where, {**dict(zip(names, row, strict=False)), **{str(i): v for i, v in enumerate(row)}}
        except StopIteration:
            return
        except UnicodeDecodeError as e:
            raise LmptError(f"{path} is not valid UTF-8 ({e.reason}): convert it to UTF-8") from None
        except csv.Error as e:
            raise LmptError(f"{path}:{reader.line_num} is not valid {fmt[1:]} ({e}): fix that line") from None


def _jsonl_records(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    for where, record in jsonl_records(path):
        if not isinstance(record, dict):
            raise LmptError(f"{where} is not a JSON object: write one {{...}} record per line")
        yield where, record


def _parquet_records(path: Path, data: TaskData) -> Iterator[tuple[str, dict[str, Any]]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as e:
        raise LmptError(f"{path} is not a readable parquet file ({e}): re-create or remove it") from None
    try:
        rows = table.to_pylist()
    except (pa.ArrowException, ValueError, OverflowError) as e:  # a timestamp out of Python's range, say
        raise LmptError(
            f"{path} holds values Python cannot read ({e}): write its columns as text and integers"
        ) from None
    for i, record in enumerate(rows):
        yield f"{path} row {i}", record


def _example(path: Path, where: str, record: dict[str, Any], data: TaskData, numbers: bool = False) -> Example:
    def field(key: str, what: str) -> Any:
        if key not in record:
            named = [k for k in record if not k.isdecimal()] or [str(len(record)) + " columns"]
            raise LmptError(
                f"{where} has no field '{key}' (it has: {', '.join(named)}): set data.{what}_field to the field "
                f"holding the {what}"
            )
        return record[key]

    text = field(data.text_field, "text")
    pair = field(data.pair_field, "pair") if data.pair_field is not None else None
    for key, value in ((data.text_field, text), (data.pair_field, pair)):
        if key is not None and not isinstance(value, str):
            raise LmptError(
                f"{where}: field '{key}' holds {type(value).__name__} {shown(value)}, not text: "
                "set data.text_field (and data.pair_field) to fields holding strings"
            )
    label = field(data.label_field, "label")
    if numbers:
        return Example(text, pair, number_label(where, label, data.label_field))
    if not isinstance(label, int | str) or (isinstance(label, str) and not label.strip()):
        raise LmptError(
            f"{where}: label {shown(label)} ({type(label).__name__}) in field '{data.label_field}' is not a class: "
            "labels are integers or non-empty strings (numbers to predict: regression=true)"
        )
    return Example(text, pair, json.dumps(label) if isinstance(label, bool) else str(label).strip())


LARGEST_SCORE = 1.8e19
"""The largest regression label whose squared error float32 holds (its largest value is about 3.4e38)."""
FIELD_ADVICE = "fix that line, or set data.label_field to the field holding the score"


def number_label(where: str, label: object, field: str, fix: str = FIELD_ADVICE) -> str:
    """A regression label as written, once it reads as a finite number a squared error in float32 can hold; anything
    else is refused naming `where`, with `fix` (the advice for where the labels come from)."""
    try:
        value = float(label) if isinstance(label, int | float | str) and not isinstance(label, bool) else math.nan
    except ValueError:
        value = math.nan
    except OverflowError:  # an integer beyond any float
        value = 2 * LARGEST_SCORE
    if not math.isfinite(value):
        raise LmptError(
            f"{where}: label {shown(label)} in field '{field}' is not a number: a regression task's labels are "
            f"finite numbers ({fix})"
        )
    if abs(value) > LARGEST_SCORE:
        raise LmptError(
            f"{where}: label {shown(label)} is too large to train on (its squared error overflows float32 beyond "
            f"{LARGEST_SCORE:.2g}): rescale the task's labels"
        )
    return str(label).strip()
