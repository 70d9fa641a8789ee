"""The one codec of the downstream records, RUN/downstream/TASK.json and the hand runs' RUN/downstream/hand/*.json:
`write_record` writes a result whole (lmpt.safe_files.write_atomically), `read_record` and `decode` read one back as
a typed `TaskRecord`, every field checked for its type, so no reader checks a plain dict by hand. The JSON on disk is
the results as the scorings give them, unchanged: every record written before the codec reads back, and `raw` keeps
the whole object, typed fields and the rest. A record names the kind that wrote it (`kind`, with `record_version`:
lmpt.downstream.kinds.base.RECORD_VERSION); one written before records named their kind is read by its keys
(`TaskKind.holds_record`, the registry's one legacy path); a record no kind recognises (a hand-written one) still
reads, with `kind` None.

Where records live. RUN/downstream/TASK.json is the run's own scoring's (the `downstream`
group, when training ends): what sweeps, studies and reports read. A hand run (`lmpt-finetune RUN task=NAME`,
`lmpt-eval RUN task=NAME`) keeps its record beside them in RUN/downstream/hand/NAME-TIME.json, never over the run's
own, and no reader of RUN/downstream/*.json sees it. Each record is written and read back by this codec, replaced
whole (written beside it, synced, renamed)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
from rich.markup import escape

from lmpt.console import warn
from lmpt.downstream.figures import EQUAL_LENGTH_PAIRS, GAIN, SCRATCH
from lmpt.downstream.kinds.base import TaskKind
from lmpt.downstream.kinds.registry import record_kind
from lmpt.downstream.significance import ITEMS_DIGEST, decode_outcomes, high_key, items_key
from lmpt.errors import LmptError
from lmpt.safe_files import write_atomically


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _numbers(raw: dict[str, Any]) -> dict[str, float]:
    return {k: n for k, v in raw.items() if (n := _number(v)) is not None}


def _strings(raw: dict[str, Any]) -> dict[str, str]:
    return {k: v for k, v in raw.items() if isinstance(v, str)}


@dataclass(frozen=True)
class Gain:
    """A figure's gain over the untrained control, as the record keeps it (`gain.FIGURE`)."""

    gain: float | None
    interval: tuple[float, float] | None
    """The gain's 95% interval; None when the record holds none (or not two numbers)."""
    pretrained: float | None
    """The run's own figure the gain is of."""
    scratch: float | None
    """The control's figure."""

    @classmethod
    def decode(cls, raw: object) -> Gain | None:
        if not isinstance(raw, dict):
            return None
        interval = raw.get("interval")
        pair = [_number(v) for v in interval] if isinstance(interval, list) and len(interval) == 2 else []
        bounds = (pair[0], pair[1]) if len(pair) == 2 and None not in pair else None
        return cls(_number(raw.get("gain")), bounds, _number(raw.get("pretrained")), _number(raw.get(SCRATCH)))  # type: ignore[arg-type]


@dataclass(frozen=True)
class Control:
    """The untrained control's section of a record (`scratch`): its figures and per-item outcomes."""

    figures: dict[str, float]
    outcomes: dict[str, str]
    """Per-item outcomes by record key (`accuracy_items`), as encoded strings."""
    init_seed: int | None

    @classmethod
    def decode(cls, raw: object) -> Control | None:
        if not isinstance(raw, dict):
            return None
        seed = raw.get("init_seed")
        return cls(_numbers(raw), _strings(raw), seed if isinstance(seed, int) and not isinstance(seed, bool) else None)

    def items(self, figure: str) -> np.ndarray | None:
        """The control's per-item outcomes of `figure` (zero-shot), None when it kept none."""
        return decode_outcomes(self.outcomes.get(items_key(figure)))


@dataclass(frozen=True)
class TaskRecord:
    """One downstream record, typed: what every reader (rankings, lmpt-compare, the study, the task cards) reads."""

    kind: type[TaskKind] | None
    """The kind whose scoring wrote it (None: no kind recognises it)."""
    task: str | None
    figures: dict[str, float]
    """Every number at the record's top level, by key (accuracy, accuracy_mean, n, chance ...)."""
    given: frozenset[str]
    """Every key at the record's top level holding a value (not null): a key here but not in `figures` holds
    something that is not a number."""
    texts: dict[str, str]
    """Every text at the record's top level: per-item outcomes (`FIGURE_items`), the items' digest, the method."""
    intervals: dict[str, tuple[float, float]]
    """Each figure's 95% interval (FIGURE_low, FIGURE_high, or the kind's own form)."""
    per_seed: tuple[dict[str, Any], ...] | None
    """A fine-tuning's figures per seed; None when the record has none, or a per_seed that is not seed records."""
    per_seed_malformed: bool
    """per_seed is there but not a list of seed records."""
    gains: dict[str, Gain] | None
    """The gains over the untrained control by figure (`gain`), None when the record has no control."""
    control: Control | None
    raw: dict[str, Any] = field(repr=False, compare=False)
    """The whole JSON object as read."""

    def figure(self, name: str) -> float | None:
        """The figure `name`, None when the record holds no number there."""
        return self.figures.get(name)

    def malformed(self, name: str) -> bool:
        """Whether the record holds `name` as something other than a number."""
        return name in self.given and name not in self.figures

    def items(self, figure: str) -> np.ndarray | None:
        """The per-item outcomes of `figure` (zero-shot), None when the record kept none."""
        return decode_outcomes(self.texts.get(items_key(figure)))

    @property
    def digest(self) -> str | None:
        """The digest of the items' texts: two records pair only when they scored the same items."""
        return self.texts.get(ITEMS_DIGEST)

    def equal_length(self) -> np.ndarray | None:
        """Minimal pairs: which pairs have sentences of equal token count; None for other kinds."""
        return decode_outcomes(self.texts.get(EQUAL_LENGTH_PAIRS))

    def seed_figures(self, figure: str) -> list[float | None] | None:
        """The figure of each fine-tuning seed (None for a seed without it); None when the record has no per_seed
        list of seed records."""
        return None if self.per_seed is None else [_number(s.get(figure)) for s in self.per_seed]

    def gain(self, figure: str) -> Gain | None:
        """The gain over the control of `figure`, None when the record has none."""
        return (self.gains or {}).get(figure)

    def headline(self, names: tuple[str, ...]) -> dict[str, Any]:
        """The values of the keys `names` the record holds, as written."""
        return {k: v for k, v in self.raw.items() if k in names}


def decode(raw: dict[str, Any]) -> TaskRecord:
    """A record's JSON object as a typed record: each field read for its type, nothing refused (a field of the wrong
    type is left out of the typed fields and said by `malformed`, `per_seed_malformed`)."""
    kind = record_kind(raw)
    numbers = _numbers(raw)
    intervals = {
        k.removesuffix("_low"): (numbers[k], numbers[high_key(k.removesuffix("_low"))])
        for k in numbers
        if k.endswith("_low") and high_key(k.removesuffix("_low")) in numbers
    }
    intervals = {**(kind.record_intervals(raw) if kind is not None else {}), **intervals}
    per_seed = raw.get("per_seed")
    seeds_ok = isinstance(per_seed, list) and all(isinstance(s, dict) for s in per_seed)
    gains = raw.get(GAIN)
    gains = {k: g for k, v in gains.items() if (g := Gain.decode(v)) is not None} if isinstance(gains, dict) else None
    task = raw.get("task")
    return TaskRecord(
        kind=kind,
        task=task if isinstance(task, str) else None,
        figures=numbers,
        given=frozenset(k for k, v in raw.items() if v is not None),
        texts=_strings(raw),
        intervals=intervals,
        per_seed=tuple(per_seed) if seeds_ok and isinstance(per_seed, list) else None,
        per_seed_malformed="per_seed" in raw and not seeds_ok,
        gains=gains,
        control=Control.decode(raw.get(SCRATCH)),
        raw=raw,
    )


def encode(record: TaskRecord | dict[str, Any]) -> str:
    """A record as the JSON text its file holds; a NaN or infinity (which JSON cannot hold) is a ValueError."""
    raw = record.raw if isinstance(record, TaskRecord) else record
    return json.dumps(raw, indent=1, allow_nan=False) + "\n"


def write_record(path: Path, record: TaskRecord | dict[str, Any]) -> None:
    """`record` as JSON at `path`, whole or absent (`write_atomically`); a NaN or infinity is refused and nothing is
    written."""
    try:
        text = encode(record)
    except ValueError:
        raise LmptError(f"the record {path} holds a value that is not a finite number: nothing was written") from None
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def read_record(path: Path) -> TaskRecord | None:
    """The record at `path`, typed; None when it is missing, unreadable or not a JSON object."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return decode(raw) if isinstance(raw, dict) else None


def task_record(run_dir: Path, task: str) -> TaskRecord | None:
    """RUN/downstream/TASK.json, typed (`read_record`); a file there that is no record is named once on the console
    (the reports read on without it, never silently)."""
    path = run_dir / DOWNSTREAM_DIR / f"{task}.json"
    record = read_record(path)
    if record is None and path.is_file() and path not in _NAMED:
        _NAMED.add(path)
        warn(escape(f"{path} is not a readable record (not a JSON object): its figures are left out"))
    return record


_NAMED: set[Path] = set()
"""Unreadable records already named on the console."""


DOWNSTREAM_DIR = "downstream"
HAND_DIR = "hand"
"""RUN/downstream/hand/: the records of hand runs, out of reach of the glob RUN/downstream/*.json."""


def record_path(run_dir: Path, task: str, named_by: str | None = None) -> Path:
    """Where the record of `task` lives in `run_dir`; a task name that is not a plain file name is refused, as the
    user typed it (`task=...`), or naming what it came from (`named_by`, e.g. "data.train=FILE")."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._+-]*", task):
        what = f"task={task}" if named_by is None else f"{named_by} gives the task name {task!r}, which"
        fix = "use" if named_by is None else "set task=NAME of"
        raise LmptError(f"{what} cannot name a file: {fix} letters, digits, '.', '_', '+' or '-'")
    return run_dir / DOWNSTREAM_DIR / f"{task}.json"


def hand_record_path(run_dir: Path, task: str, named_by: str | None = None) -> Path:
    """Where a hand run of `task` on `run_dir` keeps its record: RUN/downstream/hand/TASK-YYYYMMDD-HHMMSS.json (a
    suffix -2, -3 ... when that second is taken), never the run's own record (`record_path`, whose checks of the
    name it shares)."""
    own = record_path(run_dir, task, named_by)
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    path, n = own.parent / HAND_DIR / f"{task}-{stamp}.json", 1
    while path.exists():
        n += 1
        path = own.parent / HAND_DIR / f"{task}-{stamp}-{n}.json"
    return path
