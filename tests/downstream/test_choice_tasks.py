"""Multiple-choice task files: bundled tasks resolve, and every bad record is one line and exit 2 from lmpt-eval
(before any model is loaded, nothing written)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from lmpt.config.command_options import run_command
from lmpt.downstream.bundled import task_name
from lmpt.downstream.eval_cli import evaluate
from lmpt.downstream.zero_shot_files import read_choice_task


def _refused(argv: list[str], capsys, monkeypatch) -> str:
    monkeypatch.setattr(sys, "argv", ["lmpt-eval", *argv])
    with pytest.raises(SystemExit) as exit_info:
        run_command(evaluate)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("lmpt: error: ") and err.count("\n") == 1, err
    return err


def test_bundled_tasks_resolve_and_read() -> None:
    questions = read_choice_task("bundled:shakespeare-cloze")
    assert len(questions) > 500 and all(len(q.choices) == 4 and 0 <= q.label < 4 for q in questions)
    assert task_name("bundled:shakespeare-cloze") == "shakespeare-cloze" == task_name("x/shakespeare-cloze.jsonl")


BAD_RECORDS = {
    "one choice": ({"context": "a", "choices": ["b"], "label": 0}, "choices has 1 entry"),
    "label out of range": ({"context": "a", "choices": ["b", "c"], "label": 2}, "label 2 is not an index"),
    "negative label": ({"context": "a", "choices": ["b", "c"], "label": -1}, "label -1 is not an index"),
    "missing label": ({"context": "a", "choices": ["b", "c"]}, "has no field 'label'"),
    "missing choices": ({"context": "a", "label": 0}, "has no field 'choices'"),
    "context not text": ({"context": ["a"], "choices": ["b", "c"], "label": 0}, "context is list"),
    "choice not text": ({"context": "a", "choices": ["b", 3], "label": 0}, "choices must be a list of non-empty"),
}


@pytest.mark.parametrize("case", sorted(BAD_RECORDS))
def test_a_bad_record_is_one_line_naming_its_line(case: str, tmp_path: Path, capsys, monkeypatch) -> None:
    record, message = BAD_RECORDS[case]
    task = tmp_path / "task.jsonl"
    good = {"context": "a", "choices": ["b", "c"], "label": 1}
    task.write_text(json.dumps(good) + "\n" + json.dumps(record) + "\n")
    before = sorted(tmp_path.iterdir())
    err = _refused([str(tmp_path / "no-run"), f"task={task}"], capsys, monkeypatch)
    assert f"{task}:2" in err and message in err
    assert sorted(tmp_path.iterdir()) == before


@pytest.mark.parametrize(
    ("content", "message"),
    [("", "holds no records"), ("\n\n", "holds no records"), ("{not json\n", "is not valid JSON")],
)
def test_an_empty_or_broken_file_is_refused(content: str, message: str, tmp_path: Path, capsys, monkeypatch) -> None:
    task = tmp_path / "task.jsonl"
    task.write_text(content)
    assert message in _refused([str(tmp_path), f"task={task}"], capsys, monkeypatch)


def test_task_and_data_are_one_or_the_other(tmp_path: Path, capsys, monkeypatch) -> None:
    assert "needs data=TEXT, task=FILE.jsonl or held_out=true" in _refused([str(tmp_path)], capsys, monkeypatch)
    both = [str(tmp_path), "data=x.txt", "task=bundled:shakespeare-cloze"]
    assert "needs data=TEXT, task=FILE.jsonl or held_out=true" in _refused(both, capsys, monkeypatch)
    missing = _refused([str(tmp_path), "task=bundled:nope"], capsys, monkeypatch)
    assert "not a bundled task" in missing and "shakespeare-cloze" in missing
    assert "does not exist" in _refused([str(tmp_path), f"task={tmp_path / 'x.jsonl'}"], capsys, monkeypatch)
