"""A hand run (`lmpt-finetune RUN task=NAME`, `lmpt-eval RUN task=NAME`) keeps its record beside the run's own
(RUN/downstream/hand/NAME-TIME.json), never over RUN/downstream/NAME.json, the record the run's own scoring wrote
and sweeps, studies and reports read; and says where it wrote."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from finetune_commands import pretrained
from runner import TINY_MODEL

from lmpt.downstream.bundled import tasks_dir
from lmpt.downstream.eval_cli import evaluate
from lmpt.downstream.finetune_cli import finetune_command
from lmpt.downstream.records import HAND_DIR, hand_record_path, record_path
from lmpt.errors import LmptError

TINY = [
    "tokenizer.vocab_size=512",
    "data.seq_len=32",
    "trainer.batch_size=4",
    "trainer.max_steps=2",
    "trainer.sample_tokens=0",
    "trainer.progress=plain",
    "trainer.eval_batches=1",
    *TINY_MODEL,
    "objective=clm",
]
FAST = ["seeds=1", "max_steps=2", "batch_size=16", "seq_len=24", "lr=1e-3", "control=none"]
OWN = '{"task": "order", "own": true}\n'


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny clm run whose own scoring recorded the tasks `order` and `cloze` (stand-ins, as bytes to compare)."""
    path = pretrained(tmp_path_factory, TINY)
    for task in ("order", "cloze"):
        record_path(path, task).parent.mkdir(exist_ok=True)
        record_path(path, task).write_text(OWN.replace("order", task))
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A 40-line word-order task (train = dev) and a 12-item cloze, both cut from the shipped tasks."""
    root = tmp_path_factory.mktemp("tasks")
    order = (tasks_dir() / "shakespeare-order" / "train.jsonl").read_text().splitlines(keepends=True)[:40]
    (root / "order.jsonl").write_text("".join(order))
    cloze = (tasks_dir() / "shakespeare-cloze.jsonl").read_text().splitlines(keepends=True)[:12]
    (root / "cloze.jsonl").write_text("".join(cloze))
    return {"order": root / "order.jsonl", "cloze": root / "cloze.jsonl"}


def _hand_records(run: Path, task: str) -> list[Path]:
    return sorted((run / "downstream" / HAND_DIR).glob(f"{task}-*.json"))


def test_hand_record_paths_sit_beside_the_runs_own_and_never_collide(tmp_path: Path) -> None:
    first = hand_record_path(tmp_path, "order")
    assert first.parent == tmp_path / "downstream" / HAND_DIR and first.name.startswith("order-")
    first.parent.mkdir(parents=True)
    first.write_text("{}")
    second = hand_record_path(tmp_path, "order")  # the same second: a suffix of its own
    assert second != first and second.parent == first.parent and second != record_path(tmp_path, "order")
    with pytest.raises(LmptError, match="cannot name a file"):
        hand_record_path(tmp_path, "../order")


def test_a_hand_fine_tuning_writes_beside_the_runs_own_record_and_says_where(run, files, capsys) -> None:
    argv = [str(run), f"data.train={files['order']}", f"data.dev={files['order']}", "task=order", *FAST]
    finetune_command(argv)
    out = " ".join(capsys.readouterr().out.split())
    (kept,) = _hand_records(run, "order")
    assert f"record {kept} (a hand run: the run's own records in RUN/downstream/ are left as they are)" in out
    assert record_path(run, "order").read_text() == OWN  # the run's own record, untouched
    finetune_command([*argv, "json=true"])  # a second hand run: a record of its own, the first one kept
    again = json.loads(capsys.readouterr().out)
    assert len(_hand_records(run, "order")) == 2 and Path(again["record"]) in _hand_records(run, "order")
    assert json.loads(Path(again["record"]).read_text()) == again
    assert record_path(run, "order").read_text() == OWN
    assert sorted(p.name for p in (run / "downstream").glob("*.json")) == ["cloze.json", "order.json"]  # what
    # studies and sweeps read (RUN/downstream/*.json): the run's own records only


def test_a_hand_zero_shot_evaluation_writes_beside_the_runs_own_record(run, files, capsys, monkeypatch) -> None:
    monkeypatch.setattr(sys, "argv", ["lmpt-eval"])
    evaluate([str(run), f"task={files['cloze']}", "batch_size=4"])
    out = " ".join(capsys.readouterr().out.split())
    (kept,) = _hand_records(run, "cloze")
    assert f"record {kept} (a hand run" in out
    record = json.loads(kept.read_text())
    assert record["task"] == "cloze" and record["record"] == str(kept) and 0 <= record["accuracy"] <= 1
    assert record_path(run, "cloze").read_text() == OWN.replace("order", "cloze")
