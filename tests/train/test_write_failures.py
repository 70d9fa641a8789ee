"""Every failure while writing is one line and leaves nothing behind (issue 12, point 4), and the run directory
keeps a log (point 8): a full disk inside torch.save or safetensors, a second Ctrl-C during a checkpoint write,
a torn or foreign metrics.jsonl, a foreign config.yaml."""

from __future__ import annotations

import json
import resource
import signal
from pathlib import Path

import pytest
import torch
from golden import BASE, describe, run

from lmpt.errors import LmptError
from lmpt.rundir.checkpoint import CheckpointStore, manifest_problem
from lmpt.rundir.log import LOG_FILE
from lmpt.safe_files import save_weights
from lmpt.train.metrics import MetricsLog

TORN = '{"step": 9, "loss": 6.2'  # what a power cut in the middle of an append leaves


def leftovers(run_dir: Path) -> list[str]:
    return [p.name for p in (run_dir / "checkpoints").iterdir() if p.name.startswith((".tmp-", ".trash-"))]


def stamped(line: str) -> bool:
    """`2026-11-22T17:47:33+00:00 text`: an ISO timestamp, then the console's line."""
    stamp = line.split(" ", 1)[0]
    return len(stamp) >= 25 and stamp[4] == "-" and stamp[10] == "T"


def test_full_disk_in_a_checkpoint_then_torn_metrics_resume_with_one_log(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    result = run(run_dir, BASE, LMPT_TEST_FULL_DISK_AT_SAVE="2")  # step 8's optimizer.pt: the kernel's ENOSPC
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, describe(result)
    assert "could not write checkpoint" in lines[0] and "step_00000008" in lines[0], lines[0]
    assert "No space left on device" in lines[0] and "step_00000004 is intact" in lines[0], lines[0]
    assert leftovers(run_dir) == [] and sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["step_00000004"]
    assert manifest_problem(run_dir / "checkpoints" / "step_00000004") is None
    status = json.loads((run_dir / "status.json").read_text())
    assert status["status"] == "failed" and status["step"] == 8 and "No space left" in status["error"], status
    assert not (run_dir / "model.safetensors").exists()

    with open(run_dir / "metrics.jsonl", "a") as f:  # and then a power cut tears the last record
        f.write(TORN)
    result = run(run_dir, BASE)  # the same command, nothing fixed by hand
    assert result.returncode == 0, describe(result)
    assert "dropped a torn last record" in result.stdout
    steps = [r["step"] for r in map(json.loads, (run_dir / "metrics.jsonl").read_text().splitlines()) if "loss" in r]
    assert steps == list(range(1, 17))
    assert json.loads((run_dir / "status.json").read_text())["status"] == "completed"

    log = (run_dir / LOG_FILE).read_text().splitlines()
    assert all(stamped(line) for line in log), [line for line in log if not stamped(line)][:3]
    assert sum("=== lmpt" in line for line in log) == 2  # appended across the resume
    text = "\n".join(log)
    assert lines[0] in text  # the error that ended the first process
    assert "dropped a torn last record" in text and "resuming" in text and "step     16/16" in text


def test_second_ctrl_c_during_a_checkpoint_write(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    result = run(run_dir, BASE, LMPT_TEST_SIGINT_IN_SAVE="2")
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 130 and len(lines) == 1, describe(result)
    assert lines[0].startswith("lmpt: aborted: checkpoint") and "step_00000008 was not written" in lines[0], lines
    assert "the previous checkpoint step_00000004 is intact" in lines[0], lines[0]
    assert "Traceback" not in result.stdout + result.stderr
    assert leftovers(run_dir) == [] and manifest_problem(run_dir / "checkpoints" / "step_00000004") is None
    status = json.loads((run_dir / "status.json").read_text())
    assert status["status"] == "failed" and status["error"].startswith("aborted: checkpoint"), status
    assert (run_dir / LOG_FILE).read_text().rstrip().endswith(lines[0])


def test_foreign_config_yaml_is_refused_and_left_alone(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text("learning_rate: 0.1\nlayers: 4\n")  # another tool's
    result = run(run_dir, BASE)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, describe(result)
    assert f"{run_dir / 'config.yaml'} is not an lmpt run config" in lines[0], lines[0]
    assert sorted(p.name for p in run_dir.iterdir() if p.name != ".lock") == [".hydra", "config.yaml"]
    assert (run_dir / "config.yaml").read_text() == "learning_rate: 0.1\nlayers: 4\n"


# -- in process: the checkpoint store and metrics.jsonl ------------------------------------------------------


def parts(step: int) -> dict:
    g = torch.Generator().manual_seed(step)
    return {
        "model.safetensors": {"w": torch.randn(4096, generator=g)},
        "optimizer.pt": {"lr": 0.1},
        "trainer.pt": {"step": step},
    }


@pytest.fixture
def file_size_limit():
    """Writes past 64 KiB fail with the kernel's EFBIG (File too large), as a full disk fails them."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, hard))
    yield
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    signal.signal(signal.SIGXFSZ, previous)


@pytest.mark.parametrize("part", ["model.safetensors", "optimizer.pt"])
def test_a_failed_write_inside_safetensors_or_torch_save_is_one_line(
    tmp_path: Path, part: str, file_size_limit: None
) -> None:
    store = CheckpointStore(tmp_path / "checkpoints", keep_last=2)
    store.save(1, parts(1))
    too_big = {**parts(2), part: {"w": torch.zeros(1 << 16)}}  # 256 KiB
    with pytest.raises(LmptError) as refused:
        store.save(2, too_big)
    message = str(refused.value)
    assert "\n" not in message and "step_00000002 (File too large)" in message, message
    assert "the previous checkpoint step_00000001 is intact" in message, message
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["step_00000001"]


def test_metrics_torn_last_record_dropped_foreign_file_refused(tmp_path: Path, capsys) -> None:
    log = MetricsLog(tmp_path / "metrics.jsonl")
    whole = '{"step": 1, "loss": 6.9}\n{"step": 2, "loss": 6.8}\n'
    for tail in (TORN, "\x00" * 37):  # an append cut short; a zero-filled block after a crash
        log.path.write_text(whole + tail)
        log.repair()
        assert log.path.read_text() == whole
        assert "dropped a torn last record" in capsys.readouterr().out
    log.repair()  # a whole file: nothing to say
    assert capsys.readouterr().out == "" and log.path.read_text() == whole

    foreign = '{"step": 1, "loss": 6.9}\nepoch,loss\n1,0.5\n'
    log.path.write_text(foreign)
    with pytest.raises(LmptError, match=r"metrics.jsonl line 2 is not a metrics record lmpt wrote \('epoch,loss'\)"):
        log.repair()
    assert log.path.read_text() == foreign  # refused, not rewritten


def test_a_failed_final_model_write_is_one_line_and_leaves_nothing(tmp_path: Path, file_size_limit: None) -> None:
    with pytest.raises(LmptError) as refused:
        save_weights(tmp_path / "model.safetensors", {"w": torch.zeros(1 << 16)})
    assert str(refused.value) == (
        f"could not write {tmp_path / 'model.safetensors'} (File too large): free space and run the same command again"
    )
    assert list(tmp_path.iterdir()) == []
