"""Minimal-pair tasks for zero-shot scoring (BLiMP's format, Warstadt et al. 2020): a JSON Lines file (plain, .gz or
.zst), one pair a line, `{"sentence_good": "...", "sentence_bad": "...", "field": "...", "UID": "..."}` (field, the
phenomenon's area, and UID, its paradigm, are optional; linguistics_term and pairID are kept when given), or
`bundled:NAME` (bundled:blimp, bundled:blimp-fast; docs/tasks.md). The task-kind registry tells a minimal-pair file
from a multiple-choice one by its first record (lmpt.downstream.kinds.registry.zero_shot_kind). Every problem is
one LmptError naming the file (and line) and the fields expected."""

from __future__ import annotations

from dataclasses import dataclass

from lmpt.data.readers.jsonl import jsonl_records, shown
from lmpt.downstream.tasks.choice_tasks import resolve_task
from lmpt.errors import LmptError

PAIR_FIELDS = ("sentence_good", "sentence_bad")
UNGROUPED = "-"
"""The field or paradigm of a pair whose record names none."""


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
    return MinimalPair(good, bad, field, paradigm, term)


def read_pairs(task: str) -> list[MinimalPair]:
    """Every pair of the task `task` names (a path or bundled:NAME); an empty task is refused."""
    path = resolve_task(task)
    pairs = [_pair(where, record) for where, record in jsonl_records(path)]
    if not pairs:
        raise LmptError(f"task={task} holds no records: give a .jsonl file with one minimal pair a line")
    return pairs
