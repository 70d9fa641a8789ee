"""Labelled examples from local task files: JSON Lines, CSV and TSV (each plain, .gz or .zst, streamed by
lmpt.data.readers.streams) and parquet. TSV is read as GLUE's own processors read it (csv module, tab delimiter,
QUOTE_NONE), so GLUE's files work as they ship: SST-2 (`sentence`, `label`), MRPC (`#1 String`, `#2 String`,
`Quality`), RTE (`sentence1`, `sentence2`, string labels) and CoLA (no header: `data.text_field=3
data.label_field=1`). Every problem is one LmptError naming the file (and line) and what to do."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lmpt.data.readers.jsonl import jsonl_records
from lmpt.data.readers.streams import compression_of, open_bytes
from lmpt.downstream.options import TaskData
from lmpt.errors import LmptError

FORMATS = (".jsonl", ".csv", ".tsv", ".parquet")


@dataclass(frozen=True)
class Example:
    """One labelled example: its text, the second text of a pair task (or None) and its label as written."""

    text: str
    pair: str | None
    label: str


def task_format(path: Path) -> str:
    """ ".jsonl", ".csv", ".tsv" or ".parquet" from the file name (a .gz/.zst ending is looked through)."""
    name = path.name.lower()
    name = name[: len(name) - len(compression_of(path))]
    fmt = next((f for f in FORMATS if name.endswith(f)), None)
    if fmt is None or (fmt == ".parquet" and compression_of(path)):
        raise LmptError(f"{path}: cannot tell its format: name it .jsonl, .csv, .tsv (plain, .gz or .zst) or .parquet")
    return fmt


def read_examples(path: str, role: str, data: TaskData) -> list[Example]:
    """Every example of the `role` split (train, dev, test) at `path`; an empty split is refused."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise LmptError(f"data.{role}={path} does not exist: give the task's {role} file")
    fmt = task_format(file)
    records = _parquet_records(file, data) if fmt == ".parquet" else _text_records(file, fmt, data)
    examples = [_example(file, where, record, data) for where, record in records]
    if not examples:
        raise LmptError(f"data.{role}={path} holds no examples: give a file with at least one labelled row")
    return examples


def _fields(data: TaskData) -> list[str]:
    return [f for f in (data.text_field, data.pair_field, data.label_field) if f is not None]


def _text_records(path: Path, fmt: str, data: TaskData) -> Iterator[tuple[str, dict[str, Any]]]:
    if fmt == ".jsonl":
        yield from _jsonl_records(path)
        return
    header = data.header if data.header is not None else not all(f.isdigit() for f in _fields(data))
    dialect = {"delimiter": "\t", "quoting": csv.QUOTE_NONE} if fmt == ".tsv" else {}
    with open_bytes(path) as raw:
        reader = csv.reader(io.TextIOWrapper(raw, encoding="utf-8", newline=""), **dialect)
        try:
            names = next(reader) if header else None
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
    for i, record in enumerate(table.to_pylist()):
        yield f"{path} row {i}", record


def _example(path: Path, where: str, record: dict[str, Any], data: TaskData) -> Example:
    def field(key: str, what: str) -> Any:
        if key not in record:
            named = [k for k in record if not k.isdigit()] or [str(len(record)) + " columns"]
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
                f"{where}: field '{key}' holds {type(value).__name__} {json.dumps(value)[:40]}, not text: "
                "set data.text_field (and data.pair_field) to fields holding strings"
            )
    label = field(data.label_field, "label")
    if not isinstance(label, int | str) or (isinstance(label, str) and not label.strip()):
        raise LmptError(
            f"{where}: label {json.dumps(label)[:40]} in field '{data.label_field}' is not a class: labels are "
            "integers or non-empty strings (regression tasks are not supported)"
        )
    return Example(text, pair, json.dumps(label) if isinstance(label, bool) else str(label).strip())
