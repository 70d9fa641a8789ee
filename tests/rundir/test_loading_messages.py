"""What lmpt-eval, -generate, -fill and -finetune say while loading a run: a corrupt newest checkpoint is reported
once, as loading (not resuming), on stderr under json=true; a broken tokenizer file of the run says the run
directory is damaged rather than naming a training setting."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch

from lmpt.config.command_options import parse_command
from lmpt.console import console
from lmpt.errors import LmptError
from lmpt.inference.generate import POSITIONALS, PROG, SUMMARY, GenerateOptions
from lmpt.rundir.checkpoint import MANIFEST
from lmpt.rundir.trained import load_trained, locate_weights

CONFIG = "objective:\n  name: clm\nmodel:\n  arch: auto\n"


def _checkpoint(directory: Path, step: int) -> Path:
    """A committed checkpoint holding a trainer part with the run's config and a (dummy) weights file."""
    path = directory / f"step_{step:08d}"
    path.mkdir(parents=True)
    torch.save({"config": {"objective": {"name": "clm"}, "model": {"arch": "auto"}}}, path / "trainer.pt")
    (path / "model.safetensors").write_bytes(b"weights")
    files = {
        p.name: {"size": p.stat().st_size, "sha256": hashlib.sha256(p.read_bytes()).hexdigest()} for p in path.iterdir()
    }
    (path / MANIFEST).write_text(json.dumps({"step": step, "files": files}))
    return path


@pytest.fixture
def run_with_corrupt_newest(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text(CONFIG)
    _checkpoint(run / "checkpoints", 2)
    newest = _checkpoint(run / "checkpoints", 4)
    (newest / "model.safetensors").write_bytes(b"torn")
    return run


def test_corrupt_checkpoint_warns_once_as_loading(run_with_corrupt_newest: Path, capsys) -> None:
    first = locate_weights(run_with_corrupt_newest)  # lmpt-finetune locates the weights, then loads them
    again = locate_weights(run_with_corrupt_newest)
    assert first.weights == again.weights and first.weights.parent.name == "step_00000002"
    out = capsys.readouterr().out
    assert out.count("skipping corrupt checkpoint") == 1, out
    assert "loading step_00000002" in out and "resuming" not in out


def test_corrupt_checkpoint_warning_goes_to_stderr_under_json(run_with_corrupt_newest: Path, capsys) -> None:
    try:
        argv = [str(run_with_corrupt_newest), "json=true"]
        (run,), _ = parse_command(argv, PROG, SUMMARY, POSITIONALS, GenerateOptions)
        locate_weights(run)
    finally:
        console.stderr = False
    captured = capsys.readouterr()
    assert captured.out == ""  # stdout holds the JSON document alone
    assert captured.err.count("skipping corrupt checkpoint") == 1


def test_broken_run_tokenizer_says_the_run_directory_is_damaged(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text(CONFIG)
    (tmp_path / "model.safetensors").write_bytes(b"weights")
    (tmp_path / "tokenizer.model").write_bytes(b"not a sentencepiece model")
    with pytest.raises(LmptError) as refused:
        load_trained(tmp_path)
    message = str(refused.value)
    assert str(tmp_path / "tokenizer.model") in message
    assert "run directory is damaged" in message
    assert "tokenizer.model_file" not in message
