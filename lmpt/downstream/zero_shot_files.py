"""The files of the zero-shot tasks, each record checked as it is read, every problem one LmptError naming the file and
line and what to do:

- multiple choice (`read_choice_task`): a JSON Lines file (plain, .gz or .zst), one record a line, `{"context": "...",
  "choices": ["...", "..."], "label": i}` (label = index of the right choice), or `bundled:NAME`, a task shipped in
  lmpt/tasks/ (lmpt.downstream.bundled);
- minimal pairs (`read_pairs`, BLiMP's format, Warstadt et al. 2020): a JSON Lines file (plain, .gz or .zst), one pair
  a line, `{"sentence_good": "...", "sentence_bad": "...", "field": "...", "UID": "..."}` (field, the phenomenon's
  area, and UID, its paradigm, are optional; linguistics_term and pairID are kept when given), or `bundled:NAME`
  (bundled:blimp, bundled:blimp-fast; docs/tasks.md).

The task-kind registry tells a minimal-pair file from a multiple-choice one by its first record
(lmpt.downstream.task.zero_shot_kind)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from lmpt.data.readers.jsonl import jsonl_records, shown
from lmpt.downstream.bundled import resolve_task
from lmpt.errors import LmptError


@dataclass(frozen=True)
class ChoiceQuestion:
    """One multiple-choice record."""

    context: str
    choices: tuple[str, ...]
    label: int
    """Index of the right choice."""
    where: str = field(default="", compare=False)
    """`FILE:LINE` of the record, for messages."""


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
