"""Task kinds, each one class found by the registry (lmpt.downstream.kinds): a zero-shot file's kind told by its
first record, every kind giving its own texts to decontaminate against, so `quality=web` with a minimal-pair task
starts (it was refused: every task that was not a folder was read as multiple choice)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lmpt.downstream.kinds.choice import ChoiceResult, MultipleChoice
from lmpt.downstream.kinds.classification import Classification, ClassificationResult
from lmpt.downstream.kinds.pairs import MinimalPairs, PairsResult
from lmpt.downstream.run_tasks import quality_stage_for, read_task_items
from lmpt.downstream.task import Result, Task, kind_of, kinds, read_result, read_task, zero_shot_kind
from lmpt.downstream.zero_shot_files import read_pairs
from lmpt.errors import LmptError
from tests.composed import composed


def test_the_registry_finds_every_kind_in_its_own_module() -> None:
    assert list(kinds()) == ["pairs", "choice", "classification", "regression"]
    assert all(
        issubclass(k, Task)
        and issubclass(k.result_type, Result)
        and k.result_type.kind == k.kind
        and k.__module__ == k.result_type.__module__ == f"lmpt.downstream.kinds.{m}"
        for k, m in zip(kinds().values(), ("pairs", "choice", "classification", "regression"), strict=True)
    )
    assert [k for k in kinds().values() if k.zero_shot] == [MinimalPairs, MultipleChoice]


def test_each_task_is_read_by_its_own_kind() -> None:
    assert zero_shot_kind("bundled:blimp-fast") is MinimalPairs
    assert zero_shot_kind("bundled:blimp") is MinimalPairs  # lmpt/tasks/blimp/ is a folder, but no task's files
    assert kind_of("bundled:blimp") is MinimalPairs
    assert kind_of("bundled:shakespeare-cloze") is MultipleChoice
    assert kind_of("bundled:clinc-domains") is Classification


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
    assert type(read_result({"paradigms": {}, "accuracy": 0.5})) is PairsResult
    assert type(read_result({"accuracy_norm": 0.5, "accuracy": 0.5})) is ChoiceResult
    assert type(read_result({"per_seed": [], "accuracy_mean": 0.5})) is ClassificationResult
    assert read_result({"gain": {}}) is None


def test_a_record_names_its_kind_and_version_and_older_records_still_read(tmp_path: Path) -> None:
    """Issue 52: a record carries the kind that wrote it and the record version, so its kind is read, not guessed;
    a record written before (no `kind`) is read by its keys, the one legacy path."""
    from lmpt.downstream.records import read_record, write_record
    from lmpt.downstream.task import RECORD_VERSION

    stamped = ChoiceResult.of({"task": "cloze", "accuracy": 0.5, "accuracy_norm": 0.5}).record
    assert list(stamped)[:2] == ["kind", "record_version"] and stamped["record_version"] == RECORD_VERSION == 1
    write_record(tmp_path / "cloze.json", stamped)
    assert isinstance(read_record(tmp_path / "cloze.json"), ChoiceResult)
    assert type(read_result({"kind": "pairs", "accuracy_norm": 0.5})) is PairsResult  # named: its keys not asked
    assert read_result({"kind": "exact-match", "accuracy": 0.5}) is None  # a kind this lmpt does not know
    older = {"task": "blimp", "paradigms": {}, "accuracy": 0.5}  # as lmpt wrote it before records named their kind
    write_record(tmp_path / "blimp.json", older)
    assert isinstance(read_record(tmp_path / "blimp.json"), PairsResult)


def test_a_task_is_an_object_of_its_kind_and_its_result_one_of_its_kind(tmp_path: Path) -> None:
    """Issue 52: one Task interface (name, kind, texts, a check against a run, score, cost) and one Result a kind (its
    figures logged, rendered, written and read back)."""
    from lmpt.downstream.task import RunShape, Scoring

    task = read_task("bundled:blimp-fast", "downstream.tasks[0]", Scoring(batch_size=4, control="scratch"))
    assert isinstance(task, MinimalPairs) and task.kind == "pairs" and task.name == "blimp-fast"
    assert task.key == "downstream.tasks[0]" and task.how.batch_size == 4 and len(task.items) == 2010
    assert task.texts().texts[:2] == [task.items[0].good, task.items[0].bad]
    task.check(RunShape(64, 64))  # before the tokenizer: reading was the check
    fine = read_task("bundled:clinc-domains", "downstream.tasks[1]")
    assert isinstance(fine, Classification) and fine.kind == "classification" and fine.name == "clinc-domains"
    assert fine.options.task == "clinc-domains" and fine.options.data.train is not None
    result = PairsResult.of({"accuracy": 0.75, "chance": 0.5, "length_baseline": 0.6, "accuracy_equal_length": None})
    assert result.logged() == {"accuracy": 0.75, "chance": 0.5, "length_baseline": 0.6}
    named = result.with_keys(first={"task": "blimp-fast"}, last={"record": "x.json"})
    assert list(named.record) == [
        "task",
        "kind",
        "record_version",
        "accuracy",
        "chance",
        "length_baseline",
        "accuracy_equal_length",
        "record",
    ]
    assert read_result(named.record) == named


def test_downstream_tasks_is_one_list_and_the_old_keys_fold_into_it(capsys) -> None:
    """One `downstream.tasks=[...]` list, each task's kind told by its file or folder; the old keys still read after it,
    with a one-line note."""
    from lmpt.downstream import run_tasks
    from lmpt.downstream.run_tasks import check_downstream, task_entries
    from lmpt.objectives.registry import objective_class

    new = composed("downstream.tasks=[bundled:blimp-fast,bundled:clinc-domains]").downstream
    entries = task_entries(new)
    assert [(e.key, e.spec, e.is_zero_shot()) for e in entries] == [
        ("downstream.tasks[0]", "bundled:blimp-fast", True),
        ("downstream.tasks[1]", "bundled:clinc-domains", False),
    ]
    check_downstream(new, objective_class("clm"), 64, 64)
    assert "downstream.tasks" not in capsys.readouterr().out
    old = composed(
        "downstream.choice_tasks=[bundled:blimp-fast]", "downstream.classification_tasks=[bundled:clinc-domains]"
    ).downstream
    assert [(e.spec, e.is_zero_shot()) for e in task_entries(old)] == [(e.spec, e.is_zero_shot()) for e in entries]
    run_tasks._note_old_keys.cache_clear()  # said once a process: another test of this worker may have said it
    check_downstream(old, objective_class("clm"), 64, 64)
    noted = [line for line in capsys.readouterr().out.splitlines() if "downstream.tasks" in line]
    assert len(noted) == 1 and "downstream.tasks=[...]" in noted[0] and "still work" in noted[0]


def test_a_run_begun_with_the_old_task_keys_resumes_under_downstream_tasks() -> None:
    from lmpt.config.schema import folded_tasks

    old = {"downstream.choice_tasks": ["a"], "downstream.classification_tasks": ["b"], "trainer.seed": 0}
    new = {
        "downstream.tasks": ["a", "b"],
        "downstream.choice_tasks": [],
        "downstream.classification_tasks": [],
        "trainer.seed": 0,
    }
    assert folded_tasks(old) == folded_tasks(new) == {"trainer.seed": 0, "downstream.tasks": ["a", "b"]}
