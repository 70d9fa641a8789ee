"""One fine-tuned control per architecture and size, shared by every run that has it, and the codec of its cache entry.

A scratch control (lmpt.downstream.control) depends on nothing a run trained: its fresh weights, the task's tokens, the
recipe and the code. Two runs whose controls agree on all of them (clm and gpt-bert at one seed; one objective at two
budgets) would fine-tune the same control bit for bit, so the first stores it (`store_control`) and the others read
it back (`read_control`): the cache directory's controls/KEY.json ($LMPT_CACHE_DIR or ~/.cache/lmpt, as tokenizers),
KEY a digest of every input and of lmpt's own source (`control_key`), so a change to any of them, the code included,
makes a new entry instead of reusing a stale one. An entry is whole or absent (lmpt.safe_files.write_atomically); one
changed since it was stored, malformed or unreadable is named in one line and fine-tuned again, and the record names
the digest of the entry its figures came from.

The entry's codec (`encode_entry`, `decode_entry`): a fine-tuned scratch control as JSON (its recipe, search, seeds,
per-item outcomes and predictions of the scored splits), with a digest of its own content. Reading one back checks
the digest and every field's type and shape against the task it is read for, so an entry changed after it was stored,
or one malformed (outcome strings of another length, a figure stored as a string), is refused with the reason instead
of trusted or crashing the run. Per-item outcomes are kept as the target scores them: right/wrong as one '0'/'1'
string a seed (classes), or one list of numbers a seed (a regression's negated squared errors), so a regression's
control is shared as a classification's is."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from rich.markup import escape

from lmpt.console import warn
from lmpt.downstream.seed_figures import Search
from lmpt.downstream.seeds import SeedRuns, Tuned
from lmpt.downstream.significance import decode_outcomes, encode_outcomes
from lmpt.errors import LmptError
from lmpt.model import LanguageModel
from lmpt.safe_files import write_atomically
from lmpt.tokenizer.special import SpecialTokens

if TYPE_CHECKING:
    from lmpt.downstream.encoding import EncodedTask
    from lmpt.downstream.options import FinetuneOptions
    from lmpt.downstream.recipe import RecipeSpace
    from lmpt.downstream.target import Target

CONTROLS_DIR = "controls"
UNKEYED_OPTIONS = ("data", "task", "json", "control", "device")
"""FinetuneOptions that do not change what the control computes (the files are in the key as their tokens; the
device as the weights' and the precision's)."""


@functools.cache
def code_digest() -> str:
    """A digest of lmpt's source files: a control stored by other code is never read back."""
    digest = hashlib.sha256()
    root = Path(__file__).resolve().parents[2]  # lmpt/
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode() + b"\x00" + path.read_bytes())
    return digest.hexdigest()


def _tensor_bytes(tensor: torch.Tensor) -> bytes:
    return tensor.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes()


def control_key(
    body: LanguageModel,
    task: EncodedTask,
    o: FinetuneOptions,
    space: RecipeSpace,
    precision: str,
    special: SpecialTokens,
    arch: str,
    metrics: tuple[str, ...] = (),
) -> str:
    """The digest of everything the control's fine-tuning reads: its weights, the task's token rows and labels, the
    recipe (options and search space), the precision, the architecture, the special tokens, torch and lmpt's code;
    `metrics`: the task's own metrics its seeds carry (a control without them never stands in)."""
    digest = hashlib.sha256()
    for name, tensor in sorted(body.state_dict().items()):
        digest.update(name.encode() + str(tensor.dtype).encode() + str(tuple(tensor.shape)).encode())
        digest.update(_tensor_bytes(tensor))
    for split in (task.train, task.dev, task.test):
        if split is None:
            digest.update(b"no split")
            continue
        for rows in (split.rows, split.segments or []):
            for row in rows:
                digest.update(_tensor_bytes(row) + b"\x00")
        digest.update(_tensor_bytes(split.labels))
    options = {k: v for k, v in dataclasses.asdict(o).items() if k not in UNKEYED_OPTIONS}
    settings = {
        "classes": task.classes,
        "options": options,
        "space": dataclasses.asdict(space),
        "precision": precision,
        "arch": arch,
        "special": dataclasses.asdict(special),
        "torch": torch.__version__,
        "code": code_digest(),
        "metrics": list(metrics),
    }
    digest.update(json.dumps(settings, sort_keys=True, default=str).encode())
    return digest.hexdigest()[:32]


def controls_dir() -> Path:
    from lmpt.data.cache import default_cache_root

    return default_cache_root(None) / CONTROLS_DIR


def read_control(key: str, shape: Shape, target: Target, hidden: bool = False) -> tuple[Tuned, str] | None:
    """The control stored under `key` and its content digest, or None: none stored, or an entry that cannot be
    trusted (its content changed since it was stored, or malformed for a task of `shape` predicting `target`
    (`decode_entry`)), which one line names
    before the control is fine-tuned again (and the entry replaced): a console warning, or with `hidden` (json=true:
    stdout holds the JSON alone) a line on stderr."""
    path = controls_dir() / f"{key}.json"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return None  # none stored (or unreadable as a file): the control is fine-tuned, nothing more to say
    try:
        return decode_entry(json.loads(text), shape, target)
    except (ValueError, RecursionError) as exc:  # EntryProblem is a ValueError, as is JSON that does not parse
        reason = str(exc) if isinstance(exc, EntryProblem) else "is not JSON"
        said = f"the shared control {path} {reason}: fine-tuning the control again in its place"
        if hidden:
            print(f"lmpt: warning: {said}", file=sys.stderr)
        else:
            warn(escape(said))
        return None


def store_control(key: str, tuned: Tuned) -> str | None:
    """Keep `tuned` under `key` for the next run with the same control; the digest of its content, or None when the
    cache cannot be written (the control is then fine-tuned again next time, nothing more)."""
    path = controls_dir() / f"{key}.json"
    try:
        entry = encode_entry(tuned)
        path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(entry, allow_nan=False)
        write_atomically(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    except (OSError, ValueError, LmptError):
        return None
    return str(entry[DIGEST])


DIGEST, CONTROL = "digest", "control"
"""The entry file's two keys: the digest of the control's JSON, and that JSON."""

Shape = dict[str, tuple[int, int]]
"""Per scored split (its figures' prefix: "" dev, "test_" test), the (seeds, items) its outcomes must have."""


class EntryProblem(ValueError):
    """Why a cache entry cannot be trusted, in words that follow its file name."""


def content_digest(control: dict) -> str:
    """The sha256 of `control` as canonical JSON (sorted keys, no spaces)."""
    text = json.dumps(control, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()


def encode_entry(tuned: Tuned) -> dict:
    """`tuned` as an entry: {"digest": ..., "control": ...}."""
    runs = tuned.runs
    correct = {split: [_encode_row(row) for row in rows.numpy()] for split, rows in runs.correct.items()}
    predictions = {split: (runs.predictions or {})[split].tolist() for split in runs.correct}
    control = {
        "lr": tuned.lr,
        "pooling": tuned.pooling,
        "steps": tuned.steps,
        "search": tuned.search.to_json() if tuned.search is not None else None,
        "runs": {
            "per_seed": runs.per_seed,
            "correct": correct,
            "predictions": predictions,
            "examples": runs.examples,
            "seconds": runs.seconds,
        },
    }
    return {DIGEST: content_digest(control), CONTROL: control}


def _encode_row(row: np.ndarray) -> str | list[float]:
    """One seed's per-item outcomes: right/wrong as a '0'/'1' string, numbers (a regression's) as a list."""
    return encode_outcomes(row) if row.dtype == np.bool_ else [float(v) for v in row]


def _number(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise EntryProblem(f"has {what} = {value!r}, not a finite number")
    return float(value)


def _count(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise EntryProblem(f"has {what} = {value!r}, not a count")
    return value


def _typed(value: object, kind: type, what: str) -> object:
    if not isinstance(value, kind):
        raise EntryProblem(f"has {what} of type {type(value).__name__}, not {kind.__name__}")
    return value


def _per_seed(rows: object, shape: Shape, headline: str) -> list[dict]:
    seeds = {n for n, _ in shape.values()}
    _typed(rows, list, "runs.per_seed")
    assert isinstance(rows, list)
    if len(rows) not in seeds or not all(isinstance(r, dict) for r in rows):
        raise EntryProblem(f"has {len(rows)} per-seed records where {sorted(seeds)} seed(s) were run")
    for i, row in enumerate(rows):
        _count(row.get("seed"), f"runs.per_seed[{i}].seed")
        for prefix in shape:
            _number(row.get(prefix + headline), f"runs.per_seed[{i}].{prefix}{headline}")
        for name, value in row.items():
            if value is not None:
                _number(value, f"runs.per_seed[{i}].{name}")
        if set(row) != set(rows[0]):
            raise EntryProblem(f"has per-seed records with different figures (seed {i})")
    return rows


def _search(search: object, headline: str) -> Search | None:
    """A search record as the console describes it (lmpt-finetune's describe_search), or None (a fixed recipe)."""
    if search is None:
        return None
    _typed(search, dict, "search")
    assert isinstance(search, dict)
    _count(search.get("held_out"), "search.held_out")
    _count(search.get("steps"), "search.steps")
    candidates = _typed(search.get("candidates"), list, "search.candidates")
    assert isinstance(candidates, list)
    for i, candidate in enumerate(candidates):
        _typed(candidate, dict, f"search.candidates[{i}]")
        _number(candidate.get("lr"), f"search.candidates[{i}].lr")
        _typed(candidate.get("pooling"), str, f"search.candidates[{i}].pooling")
        _number(candidate.get(headline), f"search.candidates[{i}].{headline}")
    found = Search.from_json(search)
    if found is None:
        raise EntryProblem("has a search record that is not one a search writes")
    return found


def _number_rows(rows: list, seeds: int, items: int, split: str) -> torch.Tensor:
    """A regression's outcomes: `seeds` lists of `items` finite numbers."""
    if len(rows) != seeds or any(not isinstance(r, list) or len(r) != items for r in rows):
        lengths = [len(r) if isinstance(r, list) else type(r).__name__ for r in rows]
        raise EntryProblem(
            f"has per-item outcomes {lengths} for {split or 'dev'}, where {seeds} list(s) of {items} numbers "
            "were stored"
        )
    values = [[_number(v, f"runs.correct[{split!r}][{s}][{i}]") for i, v in enumerate(r)] for s, r in enumerate(rows)]
    return torch.tensor(values, dtype=torch.float64)


def _outcomes(correct: object, shape: Shape, numbers: bool) -> dict[str, torch.Tensor]:
    _typed(correct, dict, "runs.correct")
    assert isinstance(correct, dict)
    if set(correct) != set(shape):
        raise EntryProblem(f"holds outcomes of the splits {sorted(correct)}, not {sorted(shape)}")
    decoded = {}
    for split, (seeds, items) in shape.items():
        rows = _typed(correct[split], list, f"runs.correct[{split!r}]")
        assert isinstance(rows, list)
        if numbers:
            decoded[split] = _number_rows(rows, seeds, items, split)
            continue
        outcomes = [decode_outcomes(row) for row in rows]
        if len(rows) != seeds or any(o is None or o.size != items for o in outcomes):
            lengths = [len(r) if isinstance(r, str) else type(r).__name__ for r in rows]
            raise EntryProblem(
                f"has per-item outcomes {lengths} for {split or 'dev'}, where {seeds} string(s) of {items} "
                "'0'/'1' were stored"
            )
        decoded[split] = torch.from_numpy(np.stack(outcomes))  # type: ignore[arg-type]
    return decoded


def _predictions(predictions: object, shape: Shape, numbers: bool) -> dict[str, torch.Tensor]:
    """Each scored split's predictions, [seeds, items]: class ids, or numbers where the labels are numbers."""
    _typed(predictions, dict, "runs.predictions")
    assert isinstance(predictions, dict)
    if set(predictions) != set(shape):
        raise EntryProblem(f"holds predictions of the splits {sorted(predictions)}, not {sorted(shape)}")
    decoded = {}
    for split, (seeds, items) in shape.items():
        rows = _typed(predictions[split], list, f"runs.predictions[{split!r}]")
        assert isinstance(rows, list)
        if len(rows) != seeds or any(not isinstance(r, list) or len(r) != items for r in rows):
            raise EntryProblem(f"has predictions for {split or 'dev'} that are not {seeds} list(s) of {items} items")
        what = f"runs.predictions[{split!r}]"
        if numbers:
            values = [[_number(v, what) for v in r] for r in rows]
            decoded[split] = torch.tensor(values, dtype=torch.float32)
        else:
            decoded[split] = torch.tensor([[_count(v, what) for v in r] for r in rows], dtype=torch.int64)
    return decoded


def decode_entry(entry: object, shape: Shape, target: Target) -> tuple[Tuned, str]:
    """The control `entry` holds, and its digest; EntryProblem when its digest does not match its content or any
    field has the wrong type or shape for a task of `shape` predicting `target` (its headline figure in every seed
    and search candidate; numbers as outcomes where its labels are numbers)."""
    _typed(entry, dict, "its content")
    assert isinstance(entry, dict)
    control, digest = entry.get(CONTROL), entry.get(DIGEST)
    _typed(control, dict, CONTROL)
    assert isinstance(control, dict)
    try:
        matches = isinstance(digest, str) and content_digest(control) == digest
    except (TypeError, ValueError):  # a NaN or a value JSON cannot hold: never what was stored
        matches = False
    if not matches or not isinstance(digest, str):
        raise EntryProblem("does not match its digest (changed after it was stored)")
    runs = _typed(control.get("runs"), dict, "runs")
    assert isinstance(runs, dict)
    examples, seconds = _count(runs.get("examples"), "runs.examples"), _number(runs.get("seconds"), "runs.seconds")
    seed_runs = SeedRuns(
        _per_seed(runs.get("per_seed"), shape, target.headline),
        _outcomes(runs.get("correct"), shape, target.numeric_labels),  # a target of numbers scores items by numbers
        examples,
        seconds,
        _predictions(runs.get("predictions"), shape, target.numeric_labels),
    )
    pooling = _typed(control.get("pooling"), str, "pooling")
    tuned = Tuned(
        _number(control.get("lr"), "lr"),
        str(pooling),
        _count(control.get("steps"), "steps"),
        seed_runs,
        _search(control.get("search"), target.headline),
    )
    return tuned, digest
