"""The live training display says when the run evaluates (it looked frozen), and goes back to training after."""

from __future__ import annotations

import io
import re
import subprocess
from pathlib import Path

import pytest
from rich.console import Console
from runner import SMALL, lmpt_command, lmpt_env

import lmpt.train.display as display


def test_the_live_bar_says_evaluating_until_the_evaluation_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    terminal = Console(record=True, force_terminal=True, force_interactive=True, width=200, file=io.StringIO())
    monkeypatch.setattr(display, "console", terminal)
    shown = display.make_display("rich", 10)
    shown.start(0)
    shown.advance(4)
    shown.log(4, {"loss": 2.5})
    shown.evaluating(4)
    during = terminal.export_text()
    assert "evaluating" in during and "validation loss" in during
    shown.evaluation(4, {"val_loss": 2.25})
    (task,) = shown.progress.tasks
    assert (task.description, task.fields["metrics"]) == (display.TRAINING, "loss 2.5000")  # back, metrics kept
    shown.close()
    assert "eval step      4 | val_loss 2.2500" in terminal.export_text()


def test_a_run_on_a_terminal_shows_its_evaluation_as_it_happens(tmp_path: Path) -> None:
    env = lmpt_env(FORCE_COLOR="1", TTY_INTERACTIVE="1", COLUMNS="80")  # rich: an 80-column terminal
    overrides = [
        *SMALL,
        "trainer.progress=rich",
        "model.n_layers=1",
        "trainer.max_steps=2",
        "trainer.eval_batches=1",
        "trainer.sample_tokens=0",
    ]
    done = subprocess.run(lmpt_command(*overrides), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    out = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", done.stdout)  # the terminal's control codes
    assert re.search(r"evaluating .* 2/2 .*validation loss", out), out[-2000:]
    assert out.index("evaluating") < out.index("eval step      2")
