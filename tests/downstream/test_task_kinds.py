"""Task kinds, each one class found by the registry (lmpt.downstream.kinds): a zero-shot file's kind told by its
first record, every kind giving its own texts to decontaminate against, so `quality=web` with a minimal-pair task
starts (it was refused: every task that was not a folder was read as multiple choice)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lmpt.downstream.kinds.base import TaskKind, ZeroShotKind
from lmpt.downstream.kinds.classification import Classification
from lmpt.downstream.kinds.minimal_pairs import MinimalPairs
from lmpt.downstream.kinds.multiple_choice import MultipleChoice
from lmpt.downstream.kinds.registry import KINDS, kind_of_task, record_kind, zero_shot_kind
from lmpt.downstream.task_items import quality_stage_for, read_task_items
from lmpt.downstream.tasks.choice_tasks import read_pairs
from lmpt.errors import LmptError
from tests.composed import composed


def test_the_registry_finds_every_kind_in_its_own_module() -> None:
    assert list(KINDS) == ["pairs", "choice", "classification", "regression"]
    assert all(
        issubclass(k, TaskKind) and k.__module__ == f"lmpt.downstream.kinds.{m}"
        for k, m in zip(
            KINDS.values(), ("minimal_pairs", "multiple_choice", "classification", "regression"), strict=True
        )
    )
    assert [k for k in KINDS.values() if issubclass(k, ZeroShotKind)] == [MinimalPairs, MultipleChoice]


def test_each_task_is_read_by_its_own_kind() -> None:
    assert zero_shot_kind("bundled:blimp-fast") is MinimalPairs
    assert zero_shot_kind("bundled:blimp") is MinimalPairs  # lmpt/tasks/blimp/ is a folder, but no task's files
    assert kind_of_task("bundled:blimp") is MinimalPairs
    assert kind_of_task("bundled:shakespeare-cloze") is MultipleChoice
    assert kind_of_task("bundled:clinc-domains") is Classification


def test_a_minimal_pair_task_gives_its_sentences_to_decontaminate_against() -> None:
    items = read_task_items("bundled:blimp-fast", "downstream.choice_tasks[0]")
    pairs = read_pairs("bundled:blimp-fast")
    assert items.name == "blimp-fast" and items.texts == [s for p in pairs for s in (p.good, p.bad)]


def test_quality_web_starts_with_a_minimal_pair_task(tmp_path: Path) -> None:
    cfg = composed(
        "quality=web",
        "downstream.choice_tasks=[bundled:blimp-fast,bundled:shakespeare-cloze]",
        "downstream.classification_tasks=[bundled:clinc-domains]",
    )
    stage = quality_stage_for(cfg.quality, cfg.downstream)
    assert stage is not None
    assert [t.name for t in stage.tasks] == ["blimp-fast", "shakespeare-cloze", "clinc-domains"]


def test_a_decontamination_task_of_no_kind_is_one_line_naming_its_key(tmp_path: Path) -> None:
    path = tmp_path / "texts.jsonl"
    path.write_text(json.dumps({"text": "hello", "label": 1}) + "\n")
    with pytest.raises(LmptError) as caught:
        read_task_items(str(path), "quality.decontaminate_tasks[0]")
    message = str(caught.value)
    assert message.startswith("quality.decontaminate_tasks[0]: ") and "\n" not in message
    assert "sentence_good" in message and "context" in message


def test_a_record_read_back_names_the_kind_that_wrote_it() -> None:
    assert record_kind({"paradigms": {}, "accuracy": 0.5}) is MinimalPairs
    assert record_kind({"accuracy_norm": 0.5, "accuracy": 0.5}) is MultipleChoice
    assert record_kind({"per_seed": [], "accuracy_mean": 0.5}) is Classification
    assert record_kind({"gain": {}}) is None


def test_a_record_names_its_kind_and_version_and_older_records_still_read(tmp_path: Path) -> None:
    """Issue 52: a record carries the kind that wrote it and the record version, so its kind is read, not guessed;
    a record written before (no `kind`) is read by its keys, the one legacy path."""
    from lmpt.downstream.codec import read_record, write_record
    from lmpt.downstream.kinds.base import RECORD_VERSION

    stamped = MultipleChoice.stamped({"task": "cloze", "accuracy": 0.5, "accuracy_norm": 0.5})
    assert list(stamped)[:2] == ["kind", "record_version"] and stamped["record_version"] == RECORD_VERSION == 1
    write_record(tmp_path / "cloze.json", stamped)
    assert read_record(tmp_path / "cloze.json").kind is MultipleChoice
    assert record_kind({"kind": "pairs", "accuracy_norm": 0.5}) is MinimalPairs  # named: its keys are not asked
    assert record_kind({"kind": "exact-match", "accuracy": 0.5}) is None  # a kind this lmpt does not know
    older = {"task": "blimp", "paradigms": {}, "accuracy": 0.5}  # as lmpt wrote it before records named their kind
    write_record(tmp_path / "blimp.json", older)
    assert read_record(tmp_path / "blimp.json").kind is MinimalPairs
