"""Graceful stops (SIGTERM, SIGINT, SIGUSR1, SIGUSR2), the second Ctrl-C, time-based checkpoints, drift refusal."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest
import torch
from runner import SMALL, lmpt_command, lmpt_env, run_lmpt, train_losses, wait_for_step

ARGS = [*SMALL, "trainer.max_steps=400", "trainer.ckpt_every=1000", "trainer.log_every=1", "trainer.eval_every=0"]


def start(run: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        lmpt_command(*ARGS, *extra, f"hydra.run.dir={run}"),
        cwd=run.parent,
        env=lmpt_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2])
def test_stop_signal_commits_a_checkpoint_and_exits_for_requeue(tmp_path: Path, sig: signal.Signals) -> None:
    run = tmp_path / "run"
    process = start(run)
    wait_for_step(run, 3)
    process.send_signal(sig)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 75, err
    (checkpoint,) = (run / "checkpoints").iterdir()
    stopped_at = int(checkpoint.name.split("_")[1])
    assert 3 <= stopped_at < 400 and max(train_losses(run)) == stopped_at  # the step in flight was finished
    assert f"to resume: lmpt trainer.resume={run} (exit code 75)" in out


def test_second_ctrl_c_aborts_at_once(tmp_path: Path) -> None:
    run = tmp_path / "run"
    process = start(run, "trainer.batch_size=128")  # slow steps: the second Ctrl-C lands inside one
    wait_for_step(run, 1)
    process.send_signal(signal.SIGINT)
    for line in process.stdout:
        if "SIGINT: finishing this step" in line:
            break
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130
    assert err.strip().splitlines() == ["lmpt: aborted"]
    assert not (run / "checkpoints").exists()  # aborted before committing anything


def test_time_based_checkpoints(tmp_path: Path) -> None:
    run = tmp_path / "run"
    args = [
        *SMALL,
        "trainer.max_steps=30",
        "trainer.ckpt_every=0",
        "trainer.ckpt_minutes=0.0001",
        "trainer.keep_last=50",
    ]
    assert run_lmpt(*args, f"hydra.run.dir={run}", cwd=tmp_path).returncode == 0
    assert len(list((run / "checkpoints").iterdir())) > 5  # every step is overdue at 6 ms


def test_resume_refuses_config_drift_but_allows_run_length(tmp_path: Path) -> None:
    run = tmp_path / "run"
    assert run_lmpt(*SMALL, "trainer.max_steps=3", f"hydra.run.dir={run}", cwd=tmp_path).returncode == 0
    before = (run / "metrics.jsonl").read_text()
    for drift, key in [
        ("model.d_model=64", "model.d_model"),
        ("trainer.seed=7", "trainer.seed"),
        ("objective=prefix", "objective=prefix"),
        ("optimizer.lr=0.5", "optimizer.lr"),
    ]:
        result = run_lmpt(*SMALL, "trainer.max_steps=5", drift, f"hydra.run.dir={run}", cwd=tmp_path)
        assert result.returncode == 2 and key in result.stderr and len(result.stderr.splitlines()) == 1, result.stderr
    assert (run / "metrics.jsonl").read_text() == before  # nothing written by a refused resume
    result = run_lmpt(*SMALL, "trainer.max_steps=5", "trainer.log_every=1", f"hydra.run.dir={run}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert max(train_losses(run)) == 5


def test_disk_full_during_checkpoint_keeps_the_previous_one(tmp_path: Path, monkeypatch) -> None:
    from lmpt.errors import LmptError
    from lmpt.rundir.checkpoint import CheckpointStore, load_parts

    store = CheckpointStore(tmp_path / "checkpoints", keep_last=2)
    store.save(1, {"model.pt": {"w": torch.ones(3)}})
    real_save = torch.save

    def full_disk(obj, f, *a, **k):
        real_save(obj, f, *a, **k)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(torch, "save", full_disk)
    with pytest.raises(LmptError, match="No space left on device.*step_00000001 is intact"):
        store.save(2, {"model.pt": {"w": torch.zeros(3)}})
    monkeypatch.undo()
    assert [p.name for p in (tmp_path / "checkpoints").iterdir()] == ["step_00000001"]
    assert store.latest_valid().name == "step_00000001"
    assert torch.equal(load_parts(store.latest_valid())["model"]["w"], torch.ones(3))
