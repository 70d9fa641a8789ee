"""status.json of a completed run carries its training seconds over every launch (train_s, from the checkpoint's
Work) and its downstream scoring time, not only the last launch's wall_s."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from runner import SMALL, run_lmpt


@pytest.mark.soak  # CI: a shorter test covers the same promise; run with `pytest -m soak`
def test_a_resumed_run_keeps_the_training_time_of_its_first_launch(tmp_path: Path) -> None:
    run = tmp_path / "run"
    first = run_lmpt(*SMALL, "trainer.max_steps=3", "trainer.ckpt_every=3", f"hydra.run.dir={run}", cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-2000:]
    trained = json.loads((run / "status.json").read_text())
    again = run_lmpt(f"trainer.resume={run}", cwd=tmp_path)  # nothing left to train: the launch only closes the run
    assert again.returncode == 0, again.stderr[-2000:]
    status = json.loads((run / "status.json").read_text())
    assert status["status"] == "completed" and status["train_s"] > 0
    assert status["train_s"] == trained["train_s"]  # the checkpoint's count, not this launch's
    assert status["downstream_s"] >= 0
