"""The task kinds, found in one place: every module of lmpt.downstream.kinds is imported and each TaskKind subclass
that sets `name` is one (in `listing_order`), as the objective registry finds objectives. A new kind is its module
and its tests; nothing else lists kinds. `zero_shot_kind` tells which kind a zero-shot task file is by its first
record, `record_kind` which kind wrote a record read back."""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

import lmpt.downstream.kinds
from lmpt.data.readers.jsonl import jsonl_records, shown
from lmpt.downstream.kinds.base import TaskKind, ZeroShotKind, ZeroShotTask
from lmpt.downstream.kinds.fine_tuned import FineTunedKind
from lmpt.downstream.tasks.choice_tasks import resolve_task
from lmpt.errors import LmptError


def _subclasses(cls: type[TaskKind]) -> list[type[TaskKind]]:
    return [c for sub in cls.__subclasses__() for c in (sub, *_subclasses(sub))]


def discover_kinds() -> dict[str, type[TaskKind]]:
    """name -> class of every kind in a module of lmpt.downstream.kinds, in listing order."""
    package = lmpt.downstream.kinds.__name__
    for module in pkgutil.iter_modules(lmpt.downstream.kinds.__path__):
        importlib.import_module(f"{package}.{module.name}")
    found = [c for c in _subclasses(TaskKind) if "name" in vars(c) and c.__module__.startswith(f"{package}.")]
    return {c.name: c for c in sorted(found, key=lambda c: c.listing_order)}


KINDS: dict[str, type[TaskKind]] = {}
"""name -> class, in listing order: filled at the end of this module (kind modules may import this one)."""


def zero_shot_kinds() -> list[type[ZeroShotKind]]:
    """The kinds scored zero-shot, in listing order."""
    return [k for k in KINDS.values() if issubclass(k, ZeroShotKind)]


def _expected() -> str:
    return " or ".join(k.described for k in zero_shot_kinds())


def zero_shot_kind(task: str) -> type[ZeroShotKind]:
    """The kind of the zero-shot task `task` names (a path or bundled:NAME), by its first record; a file of no
    zero-shot kind, or an empty one, is refused naming what it may hold."""
    path = resolve_task(task)
    for where, record in jsonl_records(path):
        found = next((k for k in zero_shot_kinds() if k.reads_record(record)), None)
        if found is not None:
            return found
        keys = ", ".join(sorted(record)[:6]) if isinstance(record, dict) else ""
        raise LmptError(f"{where} is neither {_expected()}: its record has {keys or f'not an object: {shown(record)}'}")
    raise LmptError(f"task={task} holds no records: give a .jsonl file of {_expected()}, one a line")


def task_kind(task: str) -> str:
    """The name of the kind of the zero-shot task `task` names (`zero_shot_kind`)."""
    return zero_shot_kind(task).name


def kind_of_task(task: str) -> type[TaskKind]:
    """The kind of any task `task` names: the kind whose folder it is, else the zero-shot kind of its file."""
    return next((k for k in KINDS.values() if k.names_folder(task)), None) or zero_shot_kind(task)


def fine_tuned_kinds() -> list[type[FineTunedKind]]:
    """The kinds fine-tuned (downstream.classification_tasks), in listing order."""
    return [k for k in KINDS.values() if issubclass(k, FineTunedKind)]


def fine_tuned_kind(task: str) -> type[FineTunedKind]:
    """The kind of the downstream.classification_tasks entry `task`: the one that names it, else the first (which
    refuses it naming what it reads)."""
    kinds = fine_tuned_kinds()
    return next((k for k in kinds if k.names_folder(task)), kinds[0])


def kind_of(task: ZeroShotTask) -> type[ZeroShotKind]:
    """The kind that read `task`."""
    return next(k for k in zero_shot_kinds() if k.owns(task))


def record_kind(raw: dict[str, Any]) -> type[TaskKind] | None:
    """The kind whose scoring wrote the record `raw`: the one it names (`kind`, RECORD_VERSION 1 on), else, for a
    record written before records named their kind, the kind whose record it looks like (the kinds asked in
    `record_precedence` order); None for a kind lmpt does not know or a record no kind's looks like."""
    named = raw.get("kind")
    if isinstance(named, str):
        return KINDS.get(named)
    asked = sorted(KINDS.values(), key=lambda k: k.record_precedence)
    return next((k for k in asked if k.holds_record(raw)), None)


KINDS.update(discover_kinds())
