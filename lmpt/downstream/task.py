"""A downstream task and its result as every part of lmpt asks them (`Task`, `Result`), and the one registry of the
kinds (`kinds`, `read_task`, `read_result`).

A kind is one module of lmpt.downstream.kinds holding its `Task` and its `Result`: how its examples are read (from
lmpt.downstream.zero_shot_files, lmpt.downstream.labelled or lmpt.downstream.glue_files), which texts decontamination
needs, how it is checked against a run, scored (by an engine: lmpt.downstream.likelihood or lmpt.downstream.finetune,
beside lmpt.downstream.control) and what scoring costs; and how its result is logged, rendered, written and read back.
The registry imports every module of lmpt.downstream.kinds and lists each Task subclass that names its `kind`, as the
objective registry finds objectives, so no other module lists the kinds or asks a task or a record which kind it is by
name. A kind added is its module and its tests. Nothing here imports torch: reports and `lmpt --help` read it."""

from __future__ import annotations

import functools
import importlib
import pkgutil
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from lmpt.data.readers.jsonl import jsonl_records, shown
from lmpt.downstream.bundled import resolve_task
from lmpt.downstream.figures import EQUAL_LENGTH_PAIRS, GAIN, SCRATCH
from lmpt.downstream.significance import ITEMS_DIGEST, Gain, decode_outcomes, high_key, items_key
from lmpt.errors import LmptError

if TYPE_CHECKING:
    from typing_extensions import Self

    from lmpt.config.schema import DownstreamConfig
    from lmpt.objectives.base import Objective
    from lmpt.quality.decontamination import TaskItems
    from lmpt.rundir.trained import Trained
    from lmpt.tokenizer.base import Tokenizer

KINDS_PACKAGE = "lmpt.downstream.kinds"
"""Where the kinds live, one module each: the registry imports every module there."""


CHARS_PER_TOKEN = 4.0
"""Characters of English text per token, about what lmpt's BPE tokenizers give on WikiText-2 and BLiMP: a task's
scoring cost is estimated before any tokenizer exists (lmpt.downstream.run_tasks)."""


@dataclass(frozen=True)
class ScoringRun:
    """What a task's scoring costs depend on (lmpt.downstream.run_tasks builds it from the run's objective): how
    many rows a choice is read in, the run's windows and architecture, its downstream settings, and how many models
    are scored (the run's, and its untrained control)."""

    arch: str
    seq_len: int
    downstream: Any
    row_per_scored_token: bool = False
    """A pseudo-log-likelihood: a row per token of the choice, each of the whole row."""
    rows_per_choice: int = 1
    """Rows a choice is read in otherwise: 1 left to right, an own scorer's draws (mdlm)."""
    models: int = 1

    def tokens(self, text: str) -> int:
        return max(1, round(len(text) / CHARS_PER_TOKEN)) if text else 0

    def choice_tokens(self, context: str, choice: str) -> float:
        """Tokens through one model to score `choice` after `context` (its separator counted)."""
        row = self.tokens(context) + self.tokens(choice) + 1
        return float(row * ((self.tokens(choice) + 1) if self.row_per_scored_token else self.rows_per_choice))


RECORD_VERSION = 1
"""The version of the downstream records lmpt writes (`record_version`). Version 1 names the kind that wrote it
(`kind`); a record without one was written before, and its kind is read from its keys (`Result.wrote`, the one legacy
path)."""


@dataclass(frozen=True)
class Scoring:
    """How the tasks read are scored: what a run's downstream section (`Scoring.of`) or a command gives every task it
    reads. Zero-shot kinds read the batch size, the control, `hidden` and the encoders' settings; fine-tuned kinds the
    fine-tuning recipe (`recipe`), the control and the device."""

    batch_size: int = 8
    control: str = "none"
    """scratch: the task is scored on the run's untrained twin beside it (lmpt.downstream.control); none: not."""
    hidden: bool = False
    """No progress bar: a JSON answer, a curve point."""
    within_word: bool = False
    """Minimal pairs on an encoder: PLL-word-l2r instead of the plain pseudo-log-likelihood."""
    choice_pll: str = "conditional"
    """How an encoder scores a multiple-choice choice (lmpt.downstream.likelihood.CHOICE_PLL)."""
    recipe: DownstreamConfig | None = None
    """The downstream section whose fine-tuning recipe a fine-tuned task takes; None: the recipe's defaults."""
    device: str = "cpu"

    @classmethod
    def of(cls, downstream: DownstreamConfig, device: str = "cpu") -> Scoring:
        """How a run scores `downstream`'s tasks when training ends, on `device` (cuda, else cpu)."""
        return cls(
            batch_size=int(downstream.batch_size),
            control=str(downstream.control),
            recipe=downstream,
            device=device if device == "cuda" else "cpu",
        )


DEFAULT_SCORING = Scoring()
"""How a task is scored when nothing says otherwise."""


@dataclass(frozen=True)
class RunShape:
    """What a task is checked against before any training: the run's data.seq_len, its model's max_seq_len and, once
    the run's tokenizer exists, the tokenizer, objective class and architecture that frame a text (a choice too long
    for the model is refused then)."""

    seq_len: int
    max_seq_len: int
    tokenizer: Tokenizer | None = None
    objective: type[Objective] | None = None
    arch: str = ""


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _numbers(raw: dict[str, Any]) -> dict[str, float]:
    return {k: n for k, v in raw.items() if (n := _number(v)) is not None}


def _strings(raw: dict[str, Any]) -> dict[str, str]:
    return {k: v for k, v in raw.items() if isinstance(v, str)}


@dataclass(frozen=True)
class Control:
    """The untrained control's section of a record (`scratch`) as readers read it: its figures, per-item outcomes
    and the seed its weights were drawn from."""

    figures: dict[str, float]
    outcomes: dict[str, str]
    """Per-item outcomes by record key (`accuracy_items`), as encoded strings."""
    init_seed: int | None

    @classmethod
    def from_json(cls, raw: object) -> Control | None:
        if not isinstance(raw, dict):
            return None
        seed = raw.get("init_seed")
        return cls(_numbers(raw), _strings(raw), seed if isinstance(seed, int) and not isinstance(seed, bool) else None)

    def items(self, figure: str) -> np.ndarray | None:
        """The control's per-item outcomes of `figure` (zero-shot), None when it kept none."""
        return decode_outcomes(self.outcomes.get(items_key(figure)))


@dataclass(frozen=True)
class Result:
    """A task's result: what the kind's scoring gave, its record (`to_json`, read back by `from_json`: one codec a
    kind) and what the kind does with it (logged, rendered). One subclass a kind, beside its Task.

    A record read back is its kind's Result (lmpt.downstream.records), and every reader (rankings, lmpt-compare, the
    study, the task cards) reads its figures here, by name, over the JSON the record holds (`raw`): each read for
    its type and nothing refused, so a record written by hand, or before a figure existed, still reads (a field of
    the wrong type is left out and said by `malformed`, `per_seed_malformed`)."""

    kind: ClassVar[str] = ""
    record_precedence: ClassVar[int] = 0
    """Kinds whose records are told apart by more specific keys are asked first (lower first) which wrote a record
    that names no kind: a regression's holds per_seed, as a classification's does, and pearson_mean besides."""

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Self:
        """The result a record's JSON object holds."""
        raise NotImplementedError

    def to_json(self) -> dict[str, Any]:
        """The result as its record's JSON object: the kind and its version first."""
        raise NotImplementedError

    @classmethod
    def wrote(cls, raw: dict[str, Any]) -> bool:
        """Whether `raw`, a record that names no kind (written before records did), was written by this kind."""
        raise NotImplementedError

    def with_keys(self, first: dict[str, Any] | None = None, last: dict[str, Any] | None = None) -> Self:
        """The same result, its record with `first` before its keys and `last` after them (a name, a path)."""
        return type(self).from_json({**(first or {}), **self.to_json(), **(last or {})})

    def run_record(self, name: str, weights: str) -> dict[str, Any]:
        """The record a run's scoring writes in RUN/downstream/NAME.json, with the task's name and the weights."""
        raise NotImplementedError

    def own_intervals(self) -> dict[str, tuple[float, float]]:
        """Intervals the kind keeps in a form of its own (beside FIGURE_low / FIGURE_high), by figure."""
        return {}

    def logged(self) -> dict[str, float]:
        """The figures that go into metrics.jsonl as `downstream/TASK/FIGURE`."""
        raise NotImplementedError

    def render(self) -> None:
        """The result as rich tables on the console."""
        raise NotImplementedError

    @functools.cached_property
    def raw(self) -> dict[str, Any]:
        """The record's whole JSON object."""
        return self.to_json()

    @property
    def task(self) -> str | None:
        task = self.raw.get("task")
        return task if isinstance(task, str) else None

    @functools.cached_property
    def figures(self) -> dict[str, float]:
        """Every number at the record's top level, by key (accuracy, accuracy_mean, n, chance ...)."""
        return _numbers(self.raw)

    @property
    def given(self) -> frozenset[str]:
        """Every key at the record's top level holding a value (not null): a key here but not in `figures` holds
        something that is not a number."""
        return frozenset(k for k, v in self.raw.items() if v is not None)

    @property
    def texts(self) -> dict[str, str]:
        """Every text at the record's top level: per-item outcomes (`FIGURE_items`), the items' digest, the method."""
        return _strings(self.raw)

    @functools.cached_property
    def intervals(self) -> dict[str, tuple[float, float]]:
        """Each figure's 95% interval (FIGURE_low, FIGURE_high, or the kind's own form)."""
        numbers = self.figures
        bounds = {
            k.removesuffix("_low"): (numbers[k], numbers[high_key(k.removesuffix("_low"))])
            for k in numbers
            if k.endswith("_low") and high_key(k.removesuffix("_low")) in numbers
        }
        return {**self.own_intervals(), **bounds}

    @property
    def per_seed(self) -> tuple[dict[str, Any], ...] | None:
        """A fine-tuning's figures per seed; None when the record has none, or a per_seed that is not seed records."""
        rows = self.raw.get("per_seed")
        return tuple(rows) if isinstance(rows, list) and all(isinstance(s, dict) for s in rows) else None

    @property
    def per_seed_malformed(self) -> bool:
        """per_seed is there but not a list of seed records."""
        return "per_seed" in self.raw and self.per_seed is None

    @functools.cached_property
    def gains(self) -> dict[str, Gain] | None:
        """The gains over the untrained control by figure (`gain`), None when the record has no control."""
        gains = self.raw.get(GAIN)
        if not isinstance(gains, dict):
            return None
        return {k: g for k, v in gains.items() if (g := Gain.from_json(v)) is not None}

    @property
    def control(self) -> Control | None:
        """The untrained control's section, None when the record has none."""
        return Control.from_json(self.raw.get(SCRATCH))

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


@dataclass(frozen=True)
class RecordResult(Result):
    """A result that is its record as a JSON object (`record`: the figures by name, the kind and version first): the
    zero-shot kinds', and a record no kind recognises (`UnknownRecord`)."""

    record: dict[str, Any]

    @classmethod
    def of(cls, figures: dict[str, Any]) -> Self:
        """`figures` just scored, as this kind's record: its `kind` and the `record_version` first."""
        return cls({"kind": cls.kind, "record_version": RECORD_VERSION, **figures})

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Self:
        return cls(raw)

    def to_json(self) -> dict[str, Any]:
        return self.record


@dataclass(frozen=True)
class UnknownRecord(RecordResult):
    """A record no kind recognises (one written by hand, a suite's): its figures read, nothing else."""

    @classmethod
    def wrote(cls, raw: dict[str, Any]) -> bool:
        return False


@dataclass(frozen=True, kw_only=True)
class Task:
    """A downstream task, read and ready to score: its name, its kind, the texts decontamination needs, a check against
    a run, its score, and what scoring it costs. One subclass a kind (`kind` set), in lmpt.downstream.kinds."""

    kind: ClassVar[str] = ""
    """The kind's name, as records name it (`kind`)."""
    listing_order: ClassVar[int] = 100
    result_type: ClassVar[type[Result]]
    zero_shot: ClassVar[bool] = False
    """Scored zero-shot (a file, its kind told by its first record: `reads_record`) rather than fine-tuned (a folder
    or an entry its kind claims: `claims`)."""

    name: str
    """The task's name: its record's (RUN/downstream/NAME.json) and its figures' (`downstream/NAME/FIGURE`)."""
    key: str = "task"
    """What named the task (`downstream.tasks[0]`, `task`): messages about it say so."""
    how: Scoring = DEFAULT_SCORING

    @classmethod
    def claims(cls, spec: str) -> bool:
        """Whether `spec` (a path, bundled:NAME, regression:FOLDER, glue:NAME@DIR) names a task of this kind by its
        form: a folder, a prefix, an entry. A zero-shot task is a file, told by its first record instead."""
        return False

    @classmethod
    def reads_record(cls, record: object) -> bool:
        """Whether a task file whose first record is `record` is of this (zero-shot) kind."""
        return False

    @classmethod
    def named(cls, spec: str, key: str = "task") -> str:
        """The name of the task `key=spec` names, without reading its examples."""
        raise NotImplementedError

    @classmethod
    def read(cls, spec: str, key: str = "task", how: Scoring = DEFAULT_SCORING) -> Self:
        """The task `key=spec` names, read and checked as far as it can be without a run; bad input is one LmptError."""
        raise NotImplementedError

    def texts(self) -> TaskItems:
        """The texts a quality stage decontaminates the training text against."""
        raise NotImplementedError

    def check(self, run: RunShape) -> None:
        """Refuse now what scoring the task after training on `run` would refuse (one LmptError)."""
        raise NotImplementedError

    def score(self, trained: Trained) -> Result:
        """The task scored on `trained`, as `how` says."""
        raise NotImplementedError

    def scoring_tokens(self, run: ScoringRun) -> float:
        """Tokens scoring the task after training passes through one model of `run`, estimated before the run."""
        raise NotImplementedError


def _subclasses(cls: type[Task]) -> list[type[Task]]:
    return [c for sub in cls.__subclasses__() for c in (sub, *_subclasses(sub))]


@functools.cache
def kinds() -> dict[str, type[Task]]:
    """name -> Task class of every kind in a module of lmpt.downstream.kinds, in listing order (read on first use,
    after the kinds' modules, which import this one)."""
    package = importlib.import_module(KINDS_PACKAGE)
    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{KINDS_PACKAGE}.{module.name}")
    found = [c for c in _subclasses(Task) if "kind" in vars(c) and c.__module__.startswith(f"{KINDS_PACKAGE}.")]
    return {c.kind: c for c in sorted(found, key=lambda c: c.listing_order)}


def _zero_shot_kinds() -> list[type[Task]]:
    return [k for k in kinds().values() if k.zero_shot]


def _expected() -> str:
    return " or ".join(getattr(k, "described", k.kind) for k in _zero_shot_kinds())


def zero_shot_kind(spec: str) -> type[Task]:
    """The kind of the zero-shot task file `spec` names (a path or bundled:NAME), by its first record; a file of no
    zero-shot kind, or an empty one, is refused naming what it may hold."""
    path = resolve_task(spec)
    for where, record in jsonl_records(path):
        found = next((k for k in _zero_shot_kinds() if k.reads_record(record)), None)
        if found is not None:
            return found
        keys = ", ".join(sorted(record)[:6]) if isinstance(record, dict) else ""
        raise LmptError(f"{where} is neither {_expected()}: its record has {keys or f'not an object: {shown(record)}'}")
    raise LmptError(f"task={spec} holds no records: give a .jsonl file of {_expected()}, one a line")


def kind_of(spec: str, zero_shot: bool | None = None) -> type[Task]:
    """The kind of the task `spec` names: the kind that claims it by its form, else the zero-shot kind of its file.
    `zero_shot` True or False: only kinds scored that way (downstream.choice_tasks, classification_tasks); a spec no
    fine-tuned kind claims goes to the first, which refuses it naming what it reads."""
    family = [k for k in kinds().values() if zero_shot is None or k.zero_shot == zero_shot]
    claimed = next((k for k in family if k.claims(spec)), None)
    if claimed is not None:
        return claimed
    return family[0] if zero_shot is False else zero_shot_kind(spec)


def read_task(spec: str, key: str = "task", how: Scoring = DEFAULT_SCORING, zero_shot: bool | None = None) -> Task:
    """The task `key=spec` names, read by its kind (`kind_of`) to be scored as `how` says."""
    return kind_of(spec, zero_shot).read(spec, key, how)


def read_result(raw: dict[str, Any]) -> Result | None:
    """The record `raw` as its kind's Result: the kind it names (`kind`, RECORD_VERSION 1 on), else, for a record
    written before records named their kind, the kind whose record it looks like (asked in `record_precedence`
    order); None for a kind lmpt does not know or a record no kind's looks like."""
    named = raw.get("kind")
    if isinstance(named, str):
        kind = kinds().get(named)
        return kind.result_type.from_json(raw) if kind is not None else None
    asked = sorted((k.result_type for k in kinds().values()), key=lambda r: r.record_precedence)
    return next((r.from_json(raw) for r in asked if r.wrote(raw)), None)
