"""Labelled examples from local task files: JSON Lines, CSV and TSV (each plain, .gz or .zst, streamed by
lmpt.data.readers.streams) and parquet. TSV is read as GLUE's own processors read it (csv module, tab delimiter,
QUOTE_NONE), so GLUE's files work as they ship: SST-2 (`sentence`, `label`), MRPC (`#1 String`, `#2 String`,
`Quality`), RTE (`sentence1`, `sentence2`, string labels) and CoLA (no header: `data.text_field=3
data.label_field=1`). A task may also be a folder of SPLIT.jsonl files, or one lmpt ships (bundled:NAME, `task_folder`).
Every problem is one LmptError naming the file (and line) and what to do.

Multiple-choice tasks for zero-shot scoring: a JSON Lines file (plain, .gz or .zst), one record a line,
`{"context": "...", "choices": ["...", "..."], "label": i}` (label = index of the right choice), or
`bundled:NAME`, a task shipped in lmpt/tasks/ (built by scripts/make_tasks.py; docs/tasks.md). Every problem is
one LmptError naming the file and line and what to do.

Minimal-pair tasks for zero-shot scoring (BLiMP's format, Warstadt et al. 2020): a JSON Lines file (plain, .gz or
.zst), one pair a line, `{"sentence_good": "...", "sentence_bad": "...", "field": "...", "UID": "..."}` (field, the
phenomenon's area, and UID, its paradigm, are optional; linguistics_term and pairID are kept when given), or
`bundled:NAME` (bundled:blimp, bundled:blimp-fast; docs/tasks.md). The task-kind registry tells a minimal-pair file
from a multiple-choice one by its first record (lmpt.downstream.task.zero_shot_kind). Every problem is
one LmptError naming the file (and line) and the fields expected.

The options of `lmpt-finetune` (and of `lmpt.downstream.finetune.finetune`): a typed dataclass whose field
docstrings are the `--help` text, with the task's files under `data.`.

A labelled classification task read and checked (`read_labelled`: every split's labels checked against the
training labels, classes in a fixed order by `label_order`, and the task's name), before any model is needed
(tokenised for one by lmpt.downstream.training.encode_task)."""

from __future__ import annotations

import csv
import dataclasses
import io
import itertools
import json
import math
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol, cast

from lmpt.config.command_options import require
from lmpt.config.schema import FinetuneRecipe, PrecisionName
from lmpt.data.readers.jsonl import jsonl_records, shown
from lmpt.data.readers.streams import compression_of, open_bytes
from lmpt.errors import LmptError

if TYPE_CHECKING:
    from lmpt.downstream.official import TaskMetric

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


SPLITS = ("train", "dev", "test")
"""A task folder's files: SPLIT.jsonl (test optional)."""


def bundled_classification_tasks() -> list[str]:
    """The classification tasks lmpt ships: the folders of lmpt/tasks holding train.jsonl and dev.jsonl."""
    return sorted(p.name for p in tasks_dir().iterdir() if all((p / f"{s}.jsonl").is_file() for s in SPLITS[:2]))


def task_folder(task: str, key: str) -> tuple[str, TaskData]:
    """(name, files) of the task `key=task` names: bundled:NAME (lmpt/tasks/NAME/) or a folder, holding train.jsonl
    and dev.jsonl (test.jsonl optional); the name is the folder's."""
    bundled = task.startswith(BUNDLED_PREFIX)
    folder = tasks_dir() / task.removeprefix(BUNDLED_PREFIX) if bundled else Path(task).expanduser().resolve()
    train, dev, test = (folder / f"{split}.jsonl" for split in SPLITS)
    if bundled and not (train.is_file() and dev.is_file()):
        shipped = " or ".join(BUNDLED_PREFIX + name for name in bundled_classification_tasks())
        raise LmptError(f"{key}={task} is not a classification task lmpt ships: use {shipped}")
    if not (train.is_file() and dev.is_file()):
        raise LmptError(f"{key}={task} is not a folder holding train.jsonl and dev.jsonl: give such a folder")
    return folder.name, TaskData(str(train), str(dev), str(test) if test.is_file() else None)


def with_task_files(o: FinetuneOptions) -> FinetuneOptions:
    """`o` with its task's files: task=bundled:NAME brings lmpt/tasks/NAME/'s (and the name NAME), read as
    downstream.classification_tasks reads it; otherwise data.train and data.dev must be given."""
    files = {split: getattr(o.data, split) for split in SPLITS}
    if o.task is not None and o.task.startswith(BUNDLED_PREFIX):
        given = [f"data.{split}" for split, path in files.items() if path is not None]
        require(not given, f"task={o.task} brings its own files: drop {', '.join(given)} (or drop task=)")
        name, data = task_folder(o.task, "task")
        return dataclasses.replace(
            o, task=name, data=dataclasses.replace(o.data, train=data.train, dev=data.dev, test=data.test)
        )
    missing = [f"data.{split}=..." for split in SPLITS[:2] if files[split] is None]
    require(not missing, f"lmpt-finetune needs {', '.join(missing)} (or task=bundled:NAME): see `lmpt-finetune --help`")
    return o


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


BUNDLED_PREFIX = "bundled:"


@dataclass(frozen=True)
class ChoiceQuestion:
    """One multiple-choice record."""

    context: str
    choices: tuple[str, ...]
    label: int
    """Index of the right choice."""
    where: str = field(default="", compare=False)
    """`FILE:LINE` of the record, for messages."""


def tasks_dir() -> Path:
    """The folder of tasks shipped inside the package (lmpt/tasks)."""
    return Path(str(resources.files("lmpt") / "tasks"))


def resolve_task(task: str) -> Path:
    """The file a `task=` value names: a path, or `bundled:NAME` for lmpt/tasks/NAME.jsonl (or NAME.jsonl.zst)."""
    if task.startswith(BUNDLED_PREFIX):
        name = task[len(BUNDLED_PREFIX) :].removesuffix(".jsonl")
        path = tasks_dir() / f"{name}.jsonl"
        if not path.is_file() and path.with_suffix(".jsonl.zst").is_file():
            path = path.with_suffix(".jsonl.zst")
        if not path.is_file():
            shipped = ", ".join(sorted(p.name.split(".")[0] for p in tasks_dir().glob("*.jsonl*")))
            raise LmptError(f"task={task} is not a bundled task: use one of {shipped} or a path to a .jsonl file")
        return path
    path = Path(task).expanduser()
    if path.is_dir():
        raise LmptError(f"task={task} is a directory: give the .jsonl file of multiple-choice records inside it")
    if not path.is_file():
        raise LmptError(f"task={task} does not exist: give a .jsonl file of multiple-choice records")
    return path


def task_name(task: str) -> str:
    """A short name for a task: the bundled name, or the file name without .jsonl."""
    name = task[len(BUNDLED_PREFIX) :] if task.startswith(BUNDLED_PREFIX) else Path(task).name
    for suffix in (".gz", ".zst", ".jsonl"):
        name = name.removesuffix(suffix)
    return name


def _question(where: str, record: object) -> ChoiceQuestion:
    if not isinstance(record, dict):
        raise LmptError(f'{where} is not a JSON object: write one {{"context", "choices", "label"}} per line')
    missing = [key for key in ("context", "choices", "label") if key not in record]
    if missing:
        raise LmptError(
            f"{where} has no field {', '.join(repr(m) for m in missing)}: every record needs "
            '"context" (text), "choices" (a list of texts) and "label" (the index of the right choice)'
        )
    context, choices, label = record["context"], record["choices"], record["label"]
    if not isinstance(context, str):
        raise LmptError(
            f"{where}: context is {type(context).__name__} {json.dumps(context)[:40]}, not text: write it as a string"
        )
    if not isinstance(choices, list) or not all(isinstance(c, str) and c.strip() for c in choices):
        raise LmptError(f"{where}: choices must be a list of non-empty texts, got {json.dumps(choices)[:60]}")
    if len(choices) < 2:
        raise LmptError(f"{where}: choices has {len(choices)} entry: a multiple-choice record needs at least 2 choices")
    if not isinstance(label, int) or isinstance(label, bool) or not 0 <= label < len(choices):
        raise LmptError(
            f"{where}: label {json.dumps(label)} is not an index of its {len(choices)} choices: "
            f"give an integer from 0 to {len(choices) - 1}"
        )
    return ChoiceQuestion(context, tuple(choices), label, where)


def read_choice_task(task: str) -> list[ChoiceQuestion]:
    """Every record of the task `task` names (a path or bundled:NAME); an empty task is refused."""
    path = resolve_task(task)
    questions = []
    for where, record in jsonl_records(path):
        questions.append(_question(where, record))
    if not questions:
        raise LmptError(f"task={task} holds no records: give a .jsonl file with one multiple-choice record a line")
    return questions


PAIR_FIELDS = ("sentence_good", "sentence_bad")
UNGROUPED = "-"
"""The field or paradigm of a pair whose record names none."""
FIELD_SPELLINGS = {"syntax/semantics": "syntax_semantics"}
"""A field's other spellings: BLiMP labels one paradigm (principle_A_case_2) syntax/semantics and the rest of that
field syntax_semantics; read as one field, so its accuracy is one figure."""


@dataclass(frozen=True)
class MinimalPair:
    """One minimal pair: the acceptable sentence and its minimally different unacceptable twin."""

    good: str
    bad: str
    field: str = UNGROUPED
    """BLiMP's field: morphology, syntax, semantics or syntax_semantics."""
    paradigm: str = UNGROUPED
    """BLiMP's UID: the paradigm (template) the pair was generated from."""
    term: str = UNGROUPED
    """BLiMP's linguistics_term: the phenomenon."""


def _text(where: str, record: dict, key: str, required: bool) -> str:
    value = record.get(key, None if required else UNGROUPED)
    if required and value is None:
        raise LmptError(f"{where} has no field {key!r}: every minimal-pair record needs {' and '.join(PAIR_FIELDS)}")
    if not isinstance(value, str) or (required and not value.strip()):
        raise LmptError(f"{where}: {key} is {shown(value)}, not a non-empty text: write it as a string")
    return value


def _pair(where: str, record: object) -> MinimalPair:
    if not isinstance(record, dict):
        raise LmptError(f'{where} is not a JSON object: write one {{"sentence_good", "sentence_bad"}} per line')
    good, bad = (_text(where, record, key, True) for key in PAIR_FIELDS)
    field, paradigm, term = (_text(where, record, key, False) for key in ("field", "UID", "linguistics_term"))
    return MinimalPair(good, bad, FIELD_SPELLINGS.get(field, field), paradigm, term)


def read_pairs(task: str) -> list[MinimalPair]:
    """Every pair of the task `task` names (a path or bundled:NAME); an empty task is refused."""
    path = resolve_task(task)
    pairs = [_pair(where, record) for where, record in jsonl_records(path)]
    if not pairs:
        raise LmptError(f"task={task} holds no records: give a .jsonl file with one minimal pair a line")
    return pairs


MODE_MEANINGS = {
    "probe": "the pre-trained body frozen, a linear head trained on its features",
    "full": "every weight trained",
}
"""What each fine-tuning mode (lmpt.config.schema.FINETUNE_MODES) trains, as the console says it."""


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


@dataclass
class FinetuneOptions(FinetuneRecipe):
    """How to fine-tune and score one task: the recipe a run's downstream section shares (FinetuneRecipe), and what
    only lmpt-finetune sets."""

    data: TaskData
    task: str | None = None
    """Name of the task in the record RUN/downstream/TASK.json; null = the train file's name (its folder's name
    when the file is called train.*). bundled:NAME fine-tunes on a task shipped in lmpt/tasks/NAME/ (its train, dev
    and test .jsonl, no data.* files needed), named NAME, as downstream.classification_tasks reads it. glue runs
    GLUE's nine tasks from data.dir, glue:rte,mrpc,sts-b some of them (names as GLUE's folders or Hugging Face's
    configs, any case)."""
    wnli_in_score: bool = False
    """task=glue: count WNLI in the GLUE score (BERT's table left it out: every model scored its majority class)."""
    regression: bool = False
    """The label is a number to predict (STS-B's similarity): one output trained by mean squared error, scored by
    Pearson and Spearman correlation and MSE, beside a ridge-regression floor. false = classes."""
    seed: int = 0
    """First seed: the runs use seed, seed+1, ..., seed+seeds-1."""
    max_steps: int | None = None
    """Stop each seed after this many optimizer steps (null = epochs decide)."""
    lr: str | float | None = "search"
    """Peak learning rate (linear warm-up, then linear decay to 0): search (picked from lr_grid by accuracy, a
    regression's by Pearson, on a slice held back from the training split, never dev; encoders also pick first or
    mean pooling), a number, or null = 1e-4 for full, 1e-2 for probe."""
    lr_grid: list[float] | None = None
    """lr=search: the learning rates tried; null = 1e-4, 3e-4, 1e-3, 3e-3 (full) or 1e-3, 3e-3, 1e-2, 3e-2 (probe)."""
    search_fraction: float = 0.15
    """lr=search: share of the training split held back (drawn from `seed`) to score each candidate recipe on; at
    least 100 training examples must remain."""
    search_epochs: int = 1
    """lr=search: passes over the rest of the training split per candidate, one seed each (capped by max_steps);
    the chosen recipe then trains on the whole training split for `epochs`, every seed."""
    warmup: float = 0.1
    """Fraction of the steps spent warming up the learning rate."""
    weight_decay: float = 0.01
    """AdamW's decoupled weight decay (never on norms, biases or embeddings)."""
    seq_len: int | None = None
    """Longest input in tokens (longer texts are cut, the longer of a pair first); null = the run's data.seq_len."""
    pooling: str = "auto"
    """What the head reads: auto, first or mean (encoder), last (decoder), encoder_mean or decoder_first
    (encoder-decoder). auto = mean, last, encoder_mean; with lr=search an encoder's auto picks first or mean."""
    dropout: float = 0.1
    """Dropout on the pooled representation before the head."""
    device: str = "cpu"
    """cpu, cuda or auto."""
    precision: PrecisionName | None = None
    """fp32, bf16 or fp16; null = amp decides (as trainer.precision)."""
    amp: bool = False
    """Mixed precision as training picks it (bf16 where supported, fp16 on older GPUs) when precision is null."""
    compile: bool = False
    """torch.compile the model as training does (model.compile_parts)."""
    json: bool = False
    """Print one JSON object instead of a table."""


def labelled_name(options: FinetuneOptions) -> str:
    """`task=`, else the train file's name without its suffixes (its folder's when the file is train.*)."""
    if options.task:
        return options.task
    path = Path(options.data.train or "")
    stem = path.name.split(".")[0]
    return path.resolve().parent.name if stem.lower() in ("train", "training") else stem


def _is_integer(label: str) -> bool:
    return re.fullmatch(r"-?\d+", label) is not None


def label_order(labels: list[str]) -> list[str]:
    """Distinct labels, integers in numeric order first, then strings in sorted order: class i is the i-th.
    Integers compare by sign, length and digits, so one of any length never meets int()'s digit limit."""

    def key(label: str) -> tuple:
        if not _is_integer(label):
            return (1, 0, 0, label, "")
        digits = label.lstrip("-").lstrip("0") or "0"
        sign = -1 if label.startswith("-") and digits != "0" else 1
        return (0, sign, sign * len(digits), digits if sign > 0 else "".join(chr(201 - ord(c)) for c in digits), label)

    return sorted(set(labels), key=key)


def check_labels_agree(examples: list[Example], path: str) -> None:
    """Refuse true/false labels beside integer ones: `1` and `true` would silently be two classes."""
    labels = {e.label for e in examples}
    booleans = sorted(labels & {"true", "false", "True", "False", "TRUE", "FALSE"})
    integers = sorted(label for label in labels if _is_integer(label))
    if booleans and integers:
        raise LmptError(
            f"data.train={path} mixes true/false labels with integer labels ({', '.join(booleans + integers[:4])}), "
            "which would be separate classes: write every label the same way"
        )


def _check_labels(examples: list[Example], classes: list[str], role: str, path: str) -> None:
    unseen = sorted({e.label for e in examples} - set(classes))
    if unseen:
        raise LmptError(
            f"data.{role}={path} has label(s) {', '.join(map(repr, unseen[:5]))} never seen in training (training "
            f"labels: {', '.join(map(repr, classes))}): check data.label_field or the split"
        )


@dataclass(frozen=True)
class Unlabelled:
    """A file of examples only predicted, never scored (a benchmark's test split, its labels withheld): its name,
    each row's index as the file gives it, and the examples."""

    name: str
    indices: list[str]
    examples: list[Example]


@dataclass(frozen=True)
class LabelledTask:
    """A task's splits read and their labels checked, before any tokenizer is needed (what `lmpt` checks at
    start-up, lmpt.downstream.run_tasks.check_downstream), with what it is scored by and what it only predicts."""

    name: str
    classes: list[str]
    """The training labels as written, in class-id order (`label_order`); empty for a task whose labels are numbers
    to predict (regression)."""
    examples: dict[str, list[Example]]
    """The examples by split: "train", "dev" and, when given, "test"."""
    metrics: tuple[TaskMetric, ...] = ()
    """The task's own metrics (a benchmark's official ones: lmpt.downstream.official), computed the same way for
    every task that has them; none: its kind's figures alone (classification's accuracy, macro-F1 and MCC,
    regression's correlations and MSE)."""
    unlabelled: tuple[Unlabelled, ...] = ()
    """Files of examples only predicted (a benchmark's test files)."""
    named: dict[str, str] = field(default_factory=dict)
    """How messages name each split's source (`data.train=FILE`, `data.dir=DIR (RTE, dev)`): `where`."""
    label_field: str | None = None
    """The field its labels were read from, named by messages (data.label_field); None: the source's own."""

    def where(self, split: str) -> str:
        """How a message names the source of `split`."""
        return self.named.get(split, f"data.{split}")

    def unlabelled_examples(self) -> list[Example]:
        """Every example only predicted, file after file."""
        return [e for file in self.unlabelled for e in file.examples]


def check_trainable(labelled: LabelledTask, o: FinetuneOptions) -> None:
    """Refuse a training split (as drawn, `o.max_train_examples`) with nothing to learn: one class, or one score.
    Every source alike, so the bag-of-words floor and the fine-tuning never meet one."""
    train = labelled.examples["train"]
    source = labelled.where("train")
    drawn = len(train) == o.max_train_examples
    if drawn:
        source = f"max_train_examples={o.max_train_examples} of {source}"
    if not labelled.classes:  # numbers to predict, scored by correlation
        if len({float(e.label) for e in train}) < 2:
            fix = "raise max_train_examples" if drawn else "give examples of at least two scores"
            raise LmptError(f"{source} gives every example the same score: nothing to predict ({fix})")
        for role in ("dev", "test"):
            scored = labelled.examples.get(role)
            if scored is not None and len({float(e.label) for e in scored}) < 2:
                raise LmptError(
                    f"{labelled.where(role)} gives its {len(scored)} example(s) one score: a correlation with them is "
                    "undefined (give a split with at least two different scores)"
                )
        return
    seen = label_order([e.label for e in train])
    if len(seen) < 2:
        field = "" if labelled.label_field is None else f" in field '{labelled.label_field}'"
        raise _one_class(source, f"{seen[0]!r}{field}", " (raise max_train_examples)" if drawn else "")


def _one_class(source: str, label: str, hint: str = "") -> LmptError:
    needs = f"a classifier needs examples of at least two classes{hint}"
    return LmptError(f"{source} has only one class ({label}): {needs}")


def capped(labelled: LabelledTask, most: int | None, seed: int) -> LabelledTask:
    """`labelled` training on at most `most` of its training examples, drawn from `seed` (kept in file order); the
    other splits whole."""
    train = labelled.examples["train"]
    if most is None or len(train) <= most:
        return labelled
    kept = sorted(random.Random(f"max_train_examples/{seed}").sample(range(len(train)), most))
    return replace(labelled, examples={**labelled.examples, "train": [train[i] for i in kept]})


def read_labelled(data: TaskData, name: str, numbers: bool = False) -> LabelledTask:
    """Every split of `data`'s files read and its labels checked against the training labels: a task of one class,
    or with a label training never saw, is refused. `numbers`: the labels are numbers to predict, each checked as it
    is read; training needs two different ones. `name`: the task's name."""
    named = {"train": f"data.train={data.train}"}
    if numbers:
        splits = {role: read_examples(getattr(data, role), role, data, numbers=True) for role in ("train", "dev")}
        if data.test is not None:
            splits["test"] = read_examples(data.test, "test", data, numbers=True)
        return LabelledTask(name, [], splits, named=named, label_field=data.label_field)
    assert data.train is not None and data.dev is not None, "check_task asked for both files"
    train = read_examples(data.train, "train", data)
    check_labels_agree(train, data.train)
    classes = label_order([e.label for e in train])
    if len(classes) < 2:  # before the other splits are held against it
        raise _one_class(f"data.train={data.train}", f"{classes[0]!r} in field '{data.label_field}'")
    splits = {"dev": read_examples(data.dev, "dev", data)}
    if data.test is not None:
        splits["test"] = read_examples(data.test, "test", data)
    for role, split in splits.items():
        _check_labels(split, classes, role, getattr(data, role))
    return LabelledTask(name, classes, {"train": train, **splits}, named=named, label_field=data.label_field)


class ExampleSource(Protocol):
    """Where a fine-tuned task's examples come from: lmpt-finetune's data.* files (`LabelledFiles`), or a
    benchmark's folder (lmpt.downstream.glue.GlueSource)."""

    def read(self, numbers: bool = False) -> LabelledTask:
        """The task read and checked; `numbers`: its labels are numbers to predict (where the source does not say)."""
        ...

    def texts(self) -> list[str]:
        """The texts a quality stage decontaminates the training text against: every dev and test example's."""
        ...


@dataclass(frozen=True)
class LabelledFiles:
    """A task's files (data.train, data.dev, data.test and the fields they are read by), as a source of examples."""

    data: TaskData
    name: str

    def read(self, numbers: bool = False) -> LabelledTask:
        return read_labelled(self.data, self.name, numbers)

    def texts(self) -> list[str]:
        """Every string field of every dev and test record, one text a record."""
        files = [Path(file) for file in (self.data.dev, self.data.test) if file]
        return [text for file in files for text in _record_texts(file)]


def _record_texts(path: Path) -> Iterator[str]:
    """Every string field of every record of a .jsonl file, as one text per record."""
    for _, record in jsonl_records(path):
        values = record.values() if isinstance(record, dict) else [record]
        text = " ".join(v for v in values if isinstance(v, str))
        if text.strip():
            yield text
