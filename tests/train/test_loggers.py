"""TensorBoard and Weights & Biases on a switch; the W&B run id survives a resume. Neither is needed to run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from runner import SMALL, importable, run_lmpt

from lmpt.rundir.directory import FINAL_MODEL

FAKE_WANDB = Path(__file__).parent / "fake_wandb"
ARGS = [*SMALL, "trainer.log_every=1", "trainer.eval_every=2", "trainer.sample_tokens=0"]


def test_tensorboard_event_file_holds_the_logged_metrics(tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run = tmp_path / "run"
    result = run_lmpt(*ARGS, "trainer.max_steps=4", "trainer.tensorboard=true", f"hydra.run.dir={run}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    events = EventAccumulator(str(run / "tensorboard"))
    events.Reload()
    assert {"loss", "lr", "tokens_per_s", "val_loss", "val_ppl"} <= set(events.Tags()["scalars"])
    assert [e.step for e in events.Scalars("loss")] == [1, 2, 3, 4]
    logged = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if "loss" in line]
    assert [round(e.value, 5) for e in events.Scalars("loss")] == [
        round(r["loss"], 5) for r in logged if "val_loss" not in r
    ]


def test_wandb_run_id_is_kept_across_resume(tmp_path: Path, monkeypatch) -> None:
    log = tmp_path / "wandb.jsonl"
    monkeypatch.setenv("FAKE_WANDB_LOG", str(log))
    importable(monkeypatch, FAKE_WANDB)
    run = tmp_path / "run"
    for steps in (3, 5):  # the second launch continues the first from its checkpoint
        result = run_lmpt(
            *ARGS, f"trainer.max_steps={steps}", "trainer.wandb=true", f"hydra.run.dir={run}", cwd=tmp_path
        )
        assert result.returncode == 0, result.stderr
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    inits = [c for c in calls if c["call"] == "init"]
    assert len(inits) == 2 and inits[0]["id"] == inits[1]["id"] and inits[0]["resume"] == "allow"
    assert [c["step"] for c in calls if c["call"] == "log" and "loss" in c["keys"]] == [1, 2, 3, 4, 5]


def test_missing_logger_package_is_one_line(tmp_path: Path, monkeypatch) -> None:
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "wandb.py").write_text("raise ImportError('wandb is not installed')\n")  # as if it were absent
    importable(monkeypatch, blocker)
    result = run_lmpt(*ARGS, "trainer.max_steps=2", "trainer.wandb=true", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "lmpt: error: trainer.wandb=true needs Weights & Biases: pip install wandb"
    ]


def test_trackers_hold_every_step_once_across_a_resume(tmp_path: Path, monkeypatch) -> None:
    """Killed after logging steps 3 and 4 but before their checkpoint: the resumed launch logs them again.
    TensorBoard purges the first launch's events from step 3 on; W&B keeps the ones it holds (the same values,
    bit for bit) and nothing sent to it is ignored."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    log = tmp_path / "wandb.jsonl"
    monkeypatch.setenv("FAKE_WANDB_LOG", str(log))
    importable(monkeypatch, FAKE_WANDB)
    run = tmp_path / "run"
    args = [
        *ARGS,
        "trainer.max_steps=4",
        "trainer.ckpt_every=2",
        "trainer.eval_every=0",
        "trainer.tensorboard=true",
        "trainer.wandb=true",
    ]
    assert run_lmpt(*args, f"hydra.run.dir={run}", cwd=tmp_path).returncode == 0
    first = {
        r["step"]: r["loss"] for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if "loss" in r
    }
    shutil.rmtree(run / "checkpoints" / "step_00000004")  # as if killed before the step-4 checkpoint
    (run / FINAL_MODEL).unlink()

    result = run_lmpt(f"trainer.resume={run}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "from step_00000002" in result.stdout
    events = EventAccumulator(str(run / "tensorboard"))
    events.Reload()
    assert [(e.step, round(e.value, 5)) for e in events.Scalars("loss")] == [
        (s, round(first[s], 5)) for s in (1, 2, 3, 4)
    ]
    assert [e.step for e in events.Scalars("val_loss")] == [4]

    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert [c["call"] for c in calls if c["call"] == "init"] == ["init", "init"] and len({c["id"] for c in calls}) == 1
    assert not [c for c in calls if c["call"] == "dropped"]
    assert [c["step"] for c in calls if c["call"] == "log" and "loss" in c["keys"]] == [1, 2, 3, 4]
