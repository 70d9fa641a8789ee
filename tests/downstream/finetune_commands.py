"""What the lmpt-finetune tests share: a tiny run pre-trained by the real CLI, and the command's refusal read back."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from runner import run_lmpt

from lmpt.config.command_options import run_command
from lmpt.downstream.finetune_cli import finetune_command


def pretrained(tmp_path_factory: pytest.TempPathFactory, overrides: list[str]) -> Path:
    """A run directory trained by `lmpt OVERRIDES` (a module fixture's tiny run)."""
    root = tmp_path_factory.mktemp("pretrained")
    done = run_lmpt(*overrides, f"hydra.run.dir={root / 'run'}", cwd=root)
    assert done.returncode == 0, done.stderr[-2000:]
    return root / "run"


def refused(argv: list[str], capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> str:
    """lmpt-finetune ARGV's one stderr line, asserting it is the one-line refusal with exit code 2."""
    monkeypatch.setattr(sys, "argv", ["lmpt-finetune", *argv])
    with pytest.raises(SystemExit) as exit_info:
        run_command(finetune_command)
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.startswith("lmpt: error: ") and err.count("\n") == 1, err
    return err
