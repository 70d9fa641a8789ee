"""lmpt-finetune at the edges (issue 32): settings that are not finite numbers are refused at start-up, a fine-tuning
whose loss turns non-finite is refused rather than scored, a record is never written with NaN or Infinity, and a
task name that cannot be a file is refused as the user typed it. Each is one line, exit 2, nothing written."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from finetune_commands import pretrained, refused

from lmpt.config.command_options import run_command
from lmpt.downstream.records import write_record
from lmpt.errors import LmptError

REPO = Path(__file__).resolve().parents[2]
TINY = [
    "tokenizer.vocab_size=1024",
    "data.seq_len=64",
    "trainer.batch_size=8",
    "trainer.max_steps=2",
    "trainer.sample_tokens=0",
    "trainer.progress=plain",
    "trainer.eval_batches=1",
    "model.n_layers=1",
    "objective=clm",
]
KEPT = '{"kept": true}\n'


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny clm decoder, pre-trained once by the real CLI."""
    return pretrained(tmp_path_factory, TINY)


@pytest.fixture(scope="module")
def task(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("task") / "task.jsonl"
    rows = [{"text": f"line {i} of {'a fine' if i % 2 else 'a grey'} day", "label": i % 2} for i in range(16)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def _kept(run: Path) -> Path:
    record = run / "downstream" / "kept.json"
    record.parent.mkdir(exist_ok=True)
    record.write_text(KEPT)
    return record


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("lr=inf", "lr=inf must be a finite number"),
        ("lr=nan", "lr=nan must be"),
        ("weight_decay=inf", "weight_decay=inf must be a finite number"),
        ("warmup=inf", "warmup=inf must be"),
    ],
)
def test_settings_that_are_not_finite_arerefused(run, task, setting, message, capsys, monkeypatch) -> None:
    record = _kept(run)
    argv = [str(run), f"data.train={task}", f"data.dev={task}", "seeds=1", "max_steps=2", setting, "task=kept"]
    assert message in refused(argv, capsys, monkeypatch)
    assert record.read_text() == KEPT


@pytest.mark.parametrize("setting", ["lr=1e308", "weight_decay=1e308"])
def test_a_loss_that_turns_non_finite_is_refused_and_writes_nothing(run, task, setting, capsys, monkeypatch) -> None:
    record = _kept(run)
    fixed = "lr=null"  # the mode's fixed rate: 16 examples are too few for lr=search
    argv = [str(run), f"data.train={task}", f"data.dev={task}", "seeds=1", "max_steps=4", fixed, setting, "task=kept"]
    err = refused(argv, capsys, monkeypatch)
    key, value = setting.split("=")
    assert "loss is not a finite number" in err and f"{key}={float(value)!r}" in err, err
    assert record.read_text() == KEPT


def test_a_record_is_never_written_with_nan_or_infinity(tmp_path: Path) -> None:
    path = tmp_path / "downstream" / "t.json"
    with pytest.raises(LmptError, match="not a finite number"):
        write_record(path, {"accuracy": float("nan")})
    assert not path.exists()


def test_a_task_name_is_refused_as_it_was_typed(run, task, tmp_path, capsys, monkeypatch) -> None:
    argv = [str(run), f"data.train={task}", f"data.dev={task}", "task=my task"]
    err = refused(argv, capsys, monkeypatch)
    assert "task=my task cannot name a file" in err and "'my task'" not in err
    spaced = tmp_path / "my task.jsonl"
    spaced.write_text(Path(task).read_text())
    err = refused([str(run), f"data.train={spaced}", f"data.dev={task}"], capsys, monkeypatch)
    assert f"data.train={spaced} gives the task name 'my task'" in err and "set task=" in err


def test_a_choice_too_long_for_the_model_names_its_file_and_line(run, tmp_path, capsys, monkeypatch) -> None:
    from lmpt.downstream.eval_cli import evaluate

    path = tmp_path / "mc.jsonl"
    rows = [{"context": "To be or", "choices": ["not", "yes"], "label": 0}]
    rows.append({"context": "To be or", "choices": ["not", "word " * 5000], "label": 0})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    monkeypatch.setattr(sys, "argv", ["lmpt-eval", str(run), f"task={path}"])
    with pytest.raises(SystemExit) as exit_info:
        run_command(evaluate)
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.count("\n") == 1, err
    assert f"{path}:2: a choice of" in err and "does not fit" in err
