"""Parallel sweeps on one machine (GPU placement, sequential fallback on CPU) and the SLURM launcher config."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from golden import assert_same
from runner import SMALL, TINY_MODEL, lmpt_command, lmpt_env, run_lmpt, run_process, wait_for_step

from lmpt.config.resolvers import gpu_count
from lmpt.train import placement


def test_each_job_claims_a_gpu_no_other_job_holds(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(placement.tempfile, "gettempdir", lambda: str(tmp_path))
    try:
        assert placement.claim_free_gpu() == 0
        other_job = subprocess.run(  # another process on the same machine sees GPU 0 taken
            [
                sys.executable,
                "-c",
                "import torch, tempfile; from lmpt.train import placement; "
                "torch.cuda.device_count = lambda: 2; tempfile.gettempdir = lambda: " + repr(str(tmp_path)) + "; "
                "print(placement.claim_free_gpu())",
            ],
            env=lmpt_env(),
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        assert other_job == "1"
        assert placement.claim_free_gpu() == 1  # free again: that process ended, releasing its lock
        assert placement.claim_free_gpu() is None  # both held here
    finally:
        placement.release_claims()
    assert placement.claim_free_gpu() == 0
    placement.release_claims()


def test_parallel_launcher_falls_back_to_one_job_at_a_time_on_cpu(tmp_path: Path) -> None:
    result = run_process(  # joblib's workers are processes of the sweep's own
        "-m",
        "hydra/launcher=parallel",
        *SMALL,
        "trainer.max_steps=2",
        "trainer.sample_tokens=0",
        "optimizer.lr=1e-3,3e-4",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    (sweep,) = (tmp_path / "multirun").glob("*/*")
    assert [json.loads((sweep / j / "status.json").read_text())["status"] for j in "01"] == ["completed"] * 2
    assert (sweep / "summary.csv").exists()
    recorded = (sweep / "multirun.yaml").read_text()
    assert "JoblibLauncher" in recorded and "n_jobs: ${lmpt.gpu_count:}" in recorded
    assert gpu_count() == 1  # no GPU here: one job at a time


@pytest.mark.parametrize("jobs", ["0", "two", "1.5", "-5"])
def test_a_parallel_sweep_of_no_number_of_jobs_is_one_line_and_writes_nothing(tmp_path: Path, jobs: str) -> None:
    """joblib's ValueError came after Hydra had written multirun.yaml."""
    args = ("-m", "hydra/launcher=parallel", f"hydra.launcher.n_jobs={jobs}", *SMALL, "optimizer.lr=1e-3,3e-4")
    result = run_lmpt(*args, cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [
        f"lmpt: error: hydra.launcher.n_jobs={jobs} is no number of jobs to run at once: give a whole number of at "
        "least 1 (or -1: as many as there are cores)"
    ]
    assert list(tmp_path.iterdir()) == []


def test_parallel_jobs_on_a_cpu_each_take_a_group_of_cores_of_their_own(tmp_path: Path) -> None:
    """hydra.launcher.n_jobs=2 on a CPU: the two jobs run at once, each pinned to a group of cores no other job
    holds and taking its threads from it (the start line names the group), as the study's slots do."""
    result = run_process(
        "-m",
        "hydra/launcher=parallel",
        "hydra.launcher.n_jobs=2",
        *SMALL,
        "trainer.max_steps=2",
        "trainer.sample_tokens=0",
        "optimizer.lr=1e-3,3e-4",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    (sweep,) = (tmp_path / "multirun").glob("*/*")
    starts = [
        next(
            line
            for line in (sweep / j / "lmpt.log").read_text().splitlines()
            if " threads" in line or " thread " in line
        )
        for j in "01"
    ]
    groups = sorted(re.search(r"\((cores? [0-9-]+), one of 2 parallel sweep jobs\)", line).group(1) for line in starts)
    assert len(set(groups)) == 2, groups  # held at once, so each job had a group the other did not


def test_slurm_launcher_composes(tmp_path: Path) -> None:
    result = run_lmpt("hydra/launcher=slurm", "--cfg", "hydra", "--package", "hydra.launcher", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "SlurmLauncher" in result.stdout and "gpus_per_node: 1" in result.stdout
    assert "max_num_timeout: 20" in result.stdout


def _submitit_task(folder: Path) -> int:
    """The pid of the submitit task process (`python -m submitit.core._submit FOLDER/...`) working under `folder`."""
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if b"submitit.core._submit" in argv and any(str(folder).encode() in a for a in argv):
            return int(cmdline.parent.name)
    raise AssertionError("no submitit task process")


@pytest.mark.soak  # CI runs the same requeue on a live Slurm cluster (test_slurm.py)
def test_submitit_requeues_a_preempted_job_into_its_own_run_directory(tmp_path: Path) -> None:
    """SLURM's warning signal (SIGUSR2) mid-run: lmpt commits a checkpoint and hands the signal to submitit, which
    requeues the job; the requeued job resumes in the same directory and ends as a run that was never stopped.
    submitit's local executor stands in for slurmctld: the same handler, checkpoint and requeue code."""
    args = [
        *SMALL,
        "trainer.max_steps=300",
        "trainer.log_every=1",
        "trainer.eval_every=0",
        "trainer.sample_tokens=0",
        "trainer.ckpt_every=1000",
        "model.n_layers=2",
    ]
    golden = run_lmpt(*args, f"hydra.run.dir={tmp_path / 'golden'}", cwd=tmp_path)
    assert golden.returncode == 0, golden.stderr

    sweep = tmp_path / "sweep"
    launcher = subprocess.Popen(
        lmpt_command("-m", "hydra/launcher=submitit_local", *args, f"hydra.sweep.dir={sweep}"),
        cwd=tmp_path,
        env=lmpt_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for_step(sweep / "0", 5)
    first_task = _submitit_task(sweep)
    os.kill(first_task, signal.SIGUSR2)
    out, err = launcher.communicate(timeout=300)
    assert launcher.returncode == 0, err

    (job_log,) = (sweep / ".submitit").glob("*/*_0_log.out")
    log = job_log.read_text() + job_log.with_suffix(".err").read_text()
    assert "SIGUSR2: finishing this step" in log and "Requeued job" in log
    stopped_at = int(log.split("stopped at step ")[1].split()[0])
    assert 5 <= stopped_at < 300 and f"resuming {sweep / '0'} from step_{stopped_at:08d}" in log
    assert sorted(p.name for p in sweep.iterdir() if not p.name.startswith(".")) == [
        "0",
        "multirun.yaml",
        "summary.csv",
        "summary.md",
        "val_loss.png",
    ]
    assert json.loads((sweep / "0" / "status.json").read_text())["status"] == "completed"
    assert_same(tmp_path / "golden", sweep / "0", "requeued by submitit")  # every step once, bit for bit


def test_a_parallel_sweep_killed_outright_takes_its_workers_with_it(tmp_path: Path) -> None:
    """kill -9 of a `hydra/launcher=parallel` sweep: each worker stops its job with a committed checkpoint (as a stop
    signal would) and exits, so nothing trains on unseen holding its cores; their claims go with them."""
    sweep = subprocess.Popen(
        lmpt_command(
            "-m",
            "hydra/launcher=parallel",
            "hydra.launcher.n_jobs=2",
            *SMALL,
            *TINY_MODEL,
            "trainer.max_steps=1000000",
            "trainer.log_every=1",
            "trainer.sample_tokens=0",
            "optimizer.lr=1e-3,3e-4",
        ),
        cwd=tmp_path,
        env=lmpt_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    jobs: list[Path] = []
    while time.monotonic() < deadline and len(jobs) < 2:
        jobs = [j for j in tmp_path.glob("multirun/*/*/[01]") if (j / "metrics.jsonl").is_file()]
        time.sleep(0.2)
    assert len(jobs) == 2
    workers = [int(p.parent.name) for p in Path("/proc").glob("[0-9]*/stat") if _child_of(p, sweep.pid)]
    sweep.kill()
    sweep.wait()
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and any(Path(f"/proc/{pid}").exists() for pid in workers):
        time.sleep(0.2)
    assert workers and not any(Path(f"/proc/{pid}").exists() for pid in workers)
    for job in jobs:
        assert json.loads((job / "status.json").read_text())["status"] == "preempted"


def _child_of(stat: Path, parent: int) -> bool:
    """Whether the process of /proc/PID/stat is a loky worker of `parent`."""
    try:
        fields = stat.read_text().rsplit(")", 1)[1].split()
        cmdline = (stat.parent / "cmdline").read_bytes()
    except OSError:
        return False
    return int(fields[1]) == parent and b"popen_loky" in cmdline
