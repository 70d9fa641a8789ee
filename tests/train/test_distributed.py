"""Real torch.distributed processes (gloo on CPU) launched by torchrun: DDP matches one process on the same
global batch, writes one run directory and one set of checkpoints, and resumes bit for bit."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from runner import SMALL, lmpt_env, records, run_lmpt
from safetensors.torch import load_file

ARGS = [
    *SMALL,
    "trainer.max_steps=8",
    "trainer.log_every=1",
    "trainer.eval_every=4",
    "trainer.ckpt_every=4",
    "trainer.keep_last=5",
    "trainer.sample_tokens=0",
    "optimizer=adamw",
]
"""AdamW, which every strategy runs (FSDP refuses Muon): DDP, FSDP and one process compare on one optimizer.
The default, Muon, under DDP: tests/train/test_muon.py."""
PER_RANK = [a for a in ARGS if not a.startswith("trainer.batch_size")] + ["trainer.batch_size=4"]


def torchrun(*args: str, cwd: Path, nproc: int = 2) -> subprocess.CompletedProcess:
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={nproc}",
        "-m",
        "lmpt",
        *args,
    ]
    return subprocess.run(command, cwd=cwd, env=lmpt_env(), capture_output=True, text=True, timeout=300)


def losses(run: Path) -> list[tuple[int, str, float]]:
    return [(r["step"], k, r[k]) for r in records(run) for k in ("loss", "val_loss") if k in r]


@pytest.fixture(scope="module")
def ddp_run(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("ddp")
    result = torchrun(*PER_RANK, f"hydra.run.dir={root / 'run'}", cwd=root)
    assert result.returncode == 0, result.stderr[-3000:]
    return root / "run"


def test_ddp_matches_one_process_with_the_same_global_batch(tmp_path: Path, ddp_run: Path) -> None:
    single = tmp_path / "single"
    assert run_lmpt(*ARGS, f"hydra.run.dir={single}", cwd=tmp_path).returncode == 0  # batch 8 = 2 ranks x 4
    one, two = losses(single), losses(ddp_run)
    assert [(s, k) for s, k, _ in one] == [(s, k) for s, k, _ in two]
    for (step, key, a), (_, _, b) in zip(one, two, strict=True):
        assert b == pytest.approx(a, rel=1e-5, abs=1e-5), (step, key)


def test_one_run_directory_and_checkpoints_written_once(ddp_run: Path) -> None:
    assert sorted(p.name for p in (ddp_run / "checkpoints").iterdir()) == ["step_00000004", "step_00000008"]
    assert sorted(p.name for p in (ddp_run / "checkpoints" / "step_00000008").iterdir()) == [
        "manifest.json",
        "model.safetensors",
        "optimizer.pt",
        "trainer.pt",
    ]
    assert len(records(ddp_run)) == len({(r["step"], "loss" in r) for r in records(ddp_run)})  # one writer
    state = load_file(ddp_run / "checkpoints" / "step_00000008" / "model.safetensors")
    assert not any(k.startswith(("module.", "_orig_mod.")) for k in state)
    trainer = torch.load(ddp_run / "checkpoints" / "step_00000008" / "trainer.pt", weights_only=True)
    assert trainer["world_size"] == 2 and len(trainer["ranks"]) == 2
    assert not (ddp_run.parent / "outputs").exists()  # no per-rank folders
    log = (ddp_run / "lmpt.log").read_text()  # rank 0 alone keeps it
    assert log.count("=== lmpt") == 1 and log.count("step      8/8") == 1, log


def test_two_processes_resume_bitwise(tmp_path: Path, ddp_run: Path) -> None:
    run = tmp_path / "resumed"
    shutil.copytree(ddp_run, run)
    shutil.rmtree(run / "checkpoints" / "step_00000008")  # as if killed after the step-4 checkpoint
    (run / "model.safetensors").unlink()
    result = torchrun(*PER_RANK, f"hydra.run.dir={run}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "resuming" in result.stdout and "step 4" in result.stdout
    assert losses(run) == losses(ddp_run)  # exact: the records after step 4 were written again
    a, b = load_file(ddp_run / "model.safetensors"), load_file(run / "model.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_resuming_in_another_world_size_is_refused(tmp_path: Path, ddp_run: Path) -> None:
    run = tmp_path / "other"
    shutil.copytree(ddp_run, run)
    shutil.rmtree(run / "checkpoints" / "step_00000008")
    result = run_lmpt(*PER_RANK, f"hydra.run.dir={run}", cwd=tmp_path)
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert "written by 2 process(es)" in line and "--nproc_per_node=2" in line


@pytest.fixture(scope="module")
def fsdp_run(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("fsdp")
    result = torchrun(*PER_RANK, "trainer.strategy=fsdp", f"hydra.run.dir={root / 'run'}", cwd=root)
    assert result.returncode == 0, result.stderr[-3000:]
    return root / "run"


def test_fsdp_matches_ddp_and_writes_sharded_checkpoints(fsdp_run: Path, ddp_run: Path) -> None:
    for (step, key, a), (_, _, b) in zip(losses(ddp_run), losses(fsdp_run), strict=True):
        assert b == pytest.approx(a, rel=1e-5, abs=1e-5), (step, key)
    checkpoint = fsdp_run / "checkpoints" / "step_00000008"
    files = sorted(str(p.relative_to(checkpoint)) for p in checkpoint.rglob("*") if p.is_file())
    assert files == ["manifest.json", "sharded/.metadata", "sharded/__0_0.distcp", "sharded/__1_0.distcp", "trainer.pt"]
    consolidated = load_file(fsdp_run / "model.safetensors")  # one file with every full tensor
    replicated = load_file(ddp_run / "model.safetensors")
    assert consolidated.keys() == replicated.keys()
    assert all(consolidated[k].shape == replicated[k].shape for k in replicated)


def test_fsdp_resumes_bitwise_in_two_processes(tmp_path: Path, fsdp_run: Path) -> None:
    run = tmp_path / "resumed"
    shutil.copytree(fsdp_run, run)
    shutil.rmtree(run / "checkpoints" / "step_00000008")
    (run / "model.safetensors").unlink()
    result = torchrun(*PER_RANK, "trainer.strategy=fsdp", f"hydra.run.dir={run}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "resuming" in result.stdout
    assert losses(run) == losses(fsdp_run)
    a, b = load_file(fsdp_run / "model.safetensors"), load_file(run / "model.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_fsdp_outside_torchrun_is_refused(tmp_path: Path) -> None:
    result = run_lmpt(*SMALL, "trainer.strategy=fsdp", "trainer.max_steps=1", cwd=tmp_path)
    assert result.returncode == 2
    assert (
        result.stderr.strip() == "lmpt: error: trainer.strategy=fsdp runs under torchrun: "
        "torchrun --nproc_per_node=N -m lmpt ..."
    )


def test_sigterm_to_torchrun_stops_every_rank_at_the_same_step(tmp_path: Path) -> None:
    run = tmp_path / "run"
    args = [*PER_RANK, "trainer.max_steps=5000", "trainer.eval_every=0", "trainer.ckpt_every=0", f"hydra.run.dir={run}"]
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        "-m",
        "lmpt",
        *(a for a in args if not a.startswith("trainer.max_steps=8")),
    ]
    process = subprocess.Popen(command, cwd=tmp_path, env=lmpt_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    metrics = run / "metrics.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline and not (metrics.exists() and len(metrics.read_text().splitlines()) >= 3):
        time.sleep(0.1)
    process.send_signal(signal.SIGTERM)
    process.communicate(timeout=120)
    (checkpoint,) = (run / "checkpoints").iterdir()  # one commit, both ranks stopped together
    stopped = int(checkpoint.name.split("_")[1])
    assert 3 <= stopped < 5000 and max(r["step"] for r in records(run)) == stopped
    assert json.loads((run / "status.json").read_text())["status"] == "preempted"
