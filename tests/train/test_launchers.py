"""Parallel sweeps on one machine (GPU placement, sequential fallback on CPU) and the SLURM launcher config."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import torch
from lmpt_cli import SMALL, lmpt_env, run_lmpt

from lmpt.config.resolvers import gpu_count
from lmpt.train import placement


def test_each_job_claims_a_gpu_no_other_job_holds(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(placement.tempfile, "gettempdir", lambda: str(tmp_path))
    try:
        assert placement.claim_free_gpu() == 0
        other_job = subprocess.run(  # another process on the same machine sees GPU 0 taken
            [sys.executable, "-c", "import torch, tempfile; from lmpt.train import placement; "
             "torch.cuda.device_count = lambda: 2; tempfile.gettempdir = lambda: " + repr(str(tmp_path)) + "; "
             "print(placement.claim_free_gpu())"],
            env=lmpt_env(), capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        assert other_job == "1"
        assert placement.claim_free_gpu() == 1  # free again: that process ended, releasing its lock
        assert placement.claim_free_gpu() is None  # both held here
    finally:
        placement.release_gpus()
    assert placement.claim_free_gpu() == 0
    placement.release_gpus()


def test_parallel_launcher_falls_back_to_one_job_at_a_time_on_cpu(tmp_path: Path) -> None:
    result = run_lmpt("-m", "hydra/launcher=parallel", *SMALL, "trainer.max_steps=2", "trainer.sample_tokens=0",
                      "optimizer.lr=1e-3,3e-4", cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    (sweep,) = (tmp_path / "multirun").glob("*/*")
    assert [json.loads((sweep / j / "status.json").read_text())["status"] for j in "01"] == ["completed"] * 2
    assert (sweep / "summary.csv").exists()
    recorded = (sweep / "multirun.yaml").read_text()
    assert "JoblibLauncher" in recorded and "n_jobs: ${lmpt.gpu_count:}" in recorded
    assert gpu_count() == 1  # no GPU here: one job at a time


def test_slurm_launcher_composes(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "lmpt", "hydra/launcher=slurm", "--cfg", "hydra",
         "--package", "hydra.launcher"],
        cwd=tmp_path, env=lmpt_env(), capture_output=True, text=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "SlurmLauncher" in result.stdout and "gpus_per_node: 1" in result.stdout
    assert "max_num_timeout: 20" in result.stdout
