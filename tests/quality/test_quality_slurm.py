"""The quality stage on the live one-node SLURM cluster (tests/train's `slurm_cluster`): `lmpt-prepare -m
hydra/launcher=slurm_cpu quality=dedup ...` runs it as an sbatch job on the job's cores, a job killed mid-stage and
submitted again resumes from datatrove's completion markers, and an sbatch array of `prepare.shard=i/N` parts runs
it once between them; every way removes exactly what a local run removes and keeps the same documents."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from runner import lmpt_env
from slurm_cluster import SlurmCluster
from test_quality_prepare import write_corpus

NEAR = ["quality.minhash_ngram=3", "quality.minhash_threshold=0.5"]  # finds most of the planted near copies
PREPARE = [
    "tokenizer.vocab_size=512",
    "data=text",
    "data.paths=[corpus.txt]",
    "data.val_paths=[val.txt]",
    "data.documents=blank_line",
    "data.shard_docs=100",
    "quality=dedup",
    "quality.shard_docs=40",
    *NEAR,
]


def _env(cwd: Path) -> dict[str, str]:
    env = lmpt_env(LMPT_CACHE_DIR=str(cwd / "cache"))
    return env


def _corpus(cwd: Path) -> Path:
    cwd.mkdir(parents=True, exist_ok=True)
    write_corpus(cwd / "corpus.txt", n=600)
    return cwd


def _work(cwd: Path) -> Path:
    (work,) = (cwd / "cache" / "quality").glob("*/input")
    return work.parent


def _local(cwd: Path) -> dict:
    """The stage run here, on 2 processes: what every SLURM way must equal."""
    command = [sys.executable, "-m", "lmpt.prepare", *PREPARE, "quality.workers=2"]
    result = subprocess.run(command, cwd=_corpus(cwd), env=_env(cwd), capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    return _outcome(cwd)


def _outcome(cwd: Path) -> dict:
    work = _work(cwd)
    record = json.loads((work / "prepare" / "quality.json").read_text())
    kept = sorted(line for p in (work / "kept").glob("*.jsonl") for line in p.read_text().splitlines())
    return {"removed": record["removed"], "after": record["documents_after"], "kept": kept}


def _launch(cwd: Path, sweep: str) -> subprocess.Popen:
    command = [
        sys.executable,
        "-m",
        "lmpt.prepare",
        "-m",
        "hydra/launcher=slurm_cpu",
        "hydra.launcher.cpus_per_task=2",
        *PREPARE,
        f"hydra.sweep.dir={cwd / sweep}",
    ]
    return subprocess.Popen(command, cwd=cwd, env=_env(cwd), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait(condition, what: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not within {timeout}s"
        time.sleep(0.1)


def _ended(cluster: SlurmCluster, job: str) -> bool:
    """Whether every task of `job` (an array's too) has left the queue's active states."""
    states = cluster.command("squeue", "--noheader", "--states=all", "--format=%T", f"--jobs={job}", check=False)
    return not set(states.split()) & {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "REQUEUED", "SUSPENDED"}


def _job_log(sweep: Path) -> str:
    return "".join(p.read_text() for p in sorted(sweep.glob(".submitit/*/*_log.*")))


@pytest.mark.soak
def test_a_slurm_job_runs_the_stage_on_its_cores_resumes_after_a_kill_and_removes_what_a_local_run_removes(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    local = _local(tmp_path / "local")
    cwd = _corpus(tmp_path / "slurm")
    first = _launch(cwd, "first")
    markers = cwd / "cache" / "quality"
    _wait(lambda: len(list(markers.glob("*/logs/minhash_signatures/completions/*"))) >= 3, "3 minhash tasks")
    (job,) = [p.name for p in (cwd / "first" / ".submitit").glob("[0-9]*")]
    slurm_cluster.command("scancel", "--signal=KILL", job)  # as kill -9: no chance to tidy up
    _wait(lambda: _ended(slurm_cluster, job), "the kill")
    try:
        first.communicate(timeout=60)  # the launcher reports the job failed (it only waits on it)
    except subprocess.TimeoutExpired:
        first.kill()
        first.communicate()
    assert first.returncode != 0
    finished = {p: p.stat().st_mtime_ns for p in markers.glob("*/logs/*/completions/*")}
    assert len(finished) >= 3 and not list(markers.glob("*/prepare/quality.json"))  # killed part way

    second = _launch(cwd, "second")
    out, err = second.communicate(timeout=600)
    assert second.returncode == 0, f"{out[-3000:]}\n{err[-3000:]}"
    log = _job_log(cwd / "second")
    assert "data quality: what was removed and why" in log and "token cache: " in log, log
    assert all(p.stat().st_mtime_ns == mtime for p, mtime in finished.items())  # finished tasks were not run again
    executor = json.loads((_work(cwd) / "logs" / "minhash_signatures" / "executor.json").read_text())
    assert executor["workers"] == 2  # quality.workers=0: the job's hydra.launcher.cpus_per_task, not the node's
    assert _outcome(cwd) == local


@pytest.mark.soak
def test_an_sbatch_array_of_prepare_parts_runs_the_stage_once_and_removes_what_a_local_run_removes(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    local = _local(tmp_path / "local")
    cwd = _corpus(tmp_path / "array")
    command = " ".join(
        [sys.executable, "-m", "lmpt.prepare", *[f"'{a}'" for a in PREPARE], "prepare.shard=${SLURM_ARRAY_TASK_ID}/2"]
    )
    submitted = subprocess.run(
        [
            "sbatch",
            "--parsable",
            "--array=0-1",
            "--cpus-per-task=1",
            f"--chdir={cwd}",
            f"--output={cwd}/part_%a.out",
            f"--wrap={command}",
        ],
        env=_env(cwd),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert submitted.returncode == 0, submitted.stderr
    job = submitted.stdout.strip().split(";")[0]
    _wait(lambda: _ended(slurm_cluster, job), f"array job {job}", timeout=600)
    parts = [(cwd / f"part_{i}.out").read_text() for i in range(2)]
    ran = [p for p in parts if "stages: exact signatures" in p]
    assert len(ran) == 1, parts  # one part ran the stage; the other waited for it (or came after) and reused it
    assert any("reusing quality-filtered corpus" in p for p in parts), parts
    assert any("token cache: " in p for p in parts) and all("Traceback" not in p for p in parts), parts
    work = _work(cwd)
    for stage in ("exact_signatures", "minhash_signatures", "filter"):
        executor = json.loads((work / "logs" / stage / "executor.json").read_text())
        assert len(list((work / "logs" / stage / "completions").iterdir())) == executor["world_size"]
    assert _outcome(cwd) == local
