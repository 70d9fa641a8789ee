"""hydra/launcher=slurm against a live one-node SLURM cluster (scripts/slurm-local.sh): sweeps through sbatch,
sbatch's refusals as one line, and jobs stopped by SLURM (signal, requeue, time limit) that requeue and finish bit
for bit equal to a run that was never stopped, with one task or two (DDP from SLURM's variables)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import golden
import pytest
from runner import SMALL, lmpt_command, run_lmpt, wait_for_step
from slurm_cluster import SlurmCluster, start_cluster, stop_cluster

from lmpt.train.slurm import sbatch_refusal, srun_task_env

TINY = [*[a for a in SMALL if not a.startswith("trainer.sample_tokens=")], "trainer.sample_tokens=0"]
LONG = [
    *TINY,
    "trainer.max_steps=150",
    "trainer.log_every=1",
    "trainer.eval_every=50",
    "trainer.eval_batches=2",
    "trainer.ckpt_every=1000",
    "trainer.device=cpu",
    "model.n_layers=2",
    "model.d_model=64",
    "model.n_heads=2",
    "model.ffn_dim=128",
]
"""150 steps of a tiny model (about 20 s here): long enough to be stopped mid-run, checkpointed only on a stop."""


@pytest.fixture
def start_sweep() -> Iterator[Callable[..., subprocess.Popen]]:
    """Start `lmpt -m hydra/launcher=slurm_cpu ...` in the background (its jobs submitted with sbatch); a launcher
    still running when the test ends is killed."""
    launchers: list[subprocess.Popen] = []

    def start(sweep: Path, *overrides: str) -> subprocess.Popen:
        command = lmpt_command("-m", "hydra/launcher=slurm_cpu", *overrides, f"hydra.sweep.dir={sweep}")
        launchers.append(
            subprocess.Popen(
                command, cwd=sweep.parent, env=golden.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
        )
        return launchers[-1]

    yield start
    for launcher in launchers:
        if launcher.poll() is None:
            launcher.kill()
            launcher.communicate()


def finish(launcher: subprocess.Popen, timeout: float = 400) -> str:
    """Wait for the sweep; its stdout (the summary table)."""
    out, err = launcher.communicate(timeout=timeout)
    assert launcher.returncode == 0, f"exit {launcher.returncode}\n{out[-3000:]}\n{err[-3000:]}"
    return out


def job_id(sweep: Path, launcher: subprocess.Popen, timeout: float = 300) -> str:
    """The SLURM job id of a one-job sweep (submitit's folder for it), once submitted."""
    deadline = time.time() + timeout
    while time.time() < deadline and launcher.poll() is None:
        folders = [p.name for p in (sweep / ".submitit").glob("[0-9]*") if p.is_dir()]
        if folders:
            return folders[0]
        time.sleep(0.2)
    out, err = launcher.communicate(timeout=60) if launcher.poll() is not None else ("", "")
    raise AssertionError(f"no job submitted under {sweep} (launcher exit {launcher.returncode}):\n{out}\n{err}")


def job_log(sweep: Path, job: str) -> str:
    """Everything the job's tasks wrote (submitit's per-task logs)."""
    return "".join(p.read_text() for p in sorted((sweep / ".submitit" / job).glob("*_log.*")))


def start_torchrun(run_dir: Path) -> subprocess.Popen:
    """The LONG run on torchrun's 2 ranks, never stopped: what two SLURM tasks stopped and requeued must equal."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node=2",
            "-m",
            "lmpt",
            *LONG,
            f"hydra.run.dir={run_dir}",
        ],
        cwd=run_dir.parent,
        env=golden.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish_torchrun(torchrun: subprocess.Popen) -> None:
    _, err = torchrun.communicate(timeout=600)
    assert torchrun.returncode == 0, err[-3000:]


def test_local_cluster_runs_jobs_and_stops_only_its_own_daemons(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    host = subprocess.run(["hostname", "-s"], capture_output=True, text=True, check=True).stdout.strip()
    assert slurm_cluster.command("srun", "hostname").strip() == host
    other = start_cluster(tmp_path / "other")
    assert other.conf != slurm_cluster.conf
    daemons = {name: int((other.directory / f"{name}.pid").read_text()) for name in ("slurmctld", "slurmd")}
    daemons["munged"] = int((other.directory / "munge" / "munged.pid").read_text())
    report = stop_cluster(other)
    assert all(f"{pid}:{name}" in report for name, pid in daemons.items()), report
    for pid in daemons.values():
        assert not Path(f"/proc/{pid}").exists()
    assert slurm_cluster.command("sinfo", "--noheader", "--format=%t").split() == ["idle"]  # the session's: still up
    assert slurm_cluster.command("sinfo", "--noheader", "--format=%c").split() == [str(len(os.sched_getaffinity(0)))]
    assert stop_cluster(other).strip().endswith("was running)")  # nothing left of it to stop


def test_sweep_runs_each_job_through_sbatch_and_prints_the_summary(
    slurm_cluster: SlurmCluster, tmp_path: Path, start_sweep: Callable[..., subprocess.Popen]
) -> None:
    """Each job is an sbatch job; one that fails on bad input (lr -1) fails the sweep with exit 2 though it ran
    on SLURM, not in the launcher's process, and the others still complete."""
    sweep = tmp_path / "sweep"
    launcher = start_sweep(sweep, *TINY, "trainer.max_steps=3", "optimizer.lr=1e-3,3e-4,-1.0")
    out, err = launcher.communicate(timeout=400)
    assert launcher.returncode == 2, f"exit {launcher.returncode}\n{out[-3000:]}\n{err[-3000:]}"
    assert "lmpt: 1 sweep job(s) failed; the others ran" in err
    assert "optimizer.lr=0.001" in out and "optimizer.lr=0.0003" in out and "completed" in out
    status = [json.loads((sweep / j / "status.json").read_text()) for j in "012"]
    assert [s["status"] for s in status] == ["completed", "completed", "failed"]
    assert "optimizer.lr=-1.0 is invalid" in status[2]["error"] and status[2]["user_error"] is True
    (script,) = (sweep / ".submitit").glob("*/*_submission.sh")
    sbatch = script.read_text()
    assert "#SBATCH --cpus-per-task=1" in sbatch and "gpus" not in sbatch and "#SBATCH --signal=USR2@120" in sbatch
    assert (sweep / "summary.csv").exists()


@pytest.mark.parametrize(
    ("overrides", "reason", "advice"),
    [
        (["hydra/launcher=slurm_cpu", "hydra.launcher.partition=nope"], "Invalid partition name", "`sinfo` lists"),
        (["hydra/launcher=slurm"], "Invalid generic resource (gres)", "hydra/launcher=slurm_cpu"),
        (["hydra/launcher=slurm_cpu", "hydra.launcher.cpus_per_task=64"], "More processors requested", "sinfo -o"),
    ],
    ids=["partition", "gpus", "cpus"],
)
def test_a_refused_submission_is_one_line_with_sbatchs_reason(
    slurm_cluster: SlurmCluster, tmp_path: Path, overrides: list[str], reason: str, advice: str
) -> None:
    result = run_lmpt("-m", *overrides, *TINY, "optimizer.lr=1e-3,3e-4", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("lmpt: error: sbatch refused the jobs: ") and reason in line and advice in line, line
    assert slurm_cluster.command("squeue", "--noheader").strip() == ""


def test_only_sbatchs_own_refusal_is_turned_into_a_line() -> None:
    refused = RuntimeError(
        "sbatch: error: Batch job submission failed: Invalid account or account/partition combination specified"
    )
    refused.__cause__ = subprocess.CalledProcessError(1, ["sbatch", "job.sh"])
    assert sbatch_refusal(refused) == (
        "sbatch refused the jobs: Invalid account or account/partition combination specified: set "
        "hydra.launcher.account (and partition) to ones you may use (`sacctmgr show assoc user=$USER`)"
    )
    crashed = RuntimeError("scontrol: error: ...")
    crashed.__cause__ = subprocess.CalledProcessError(1, ["scontrol", "requeue", "7"])
    assert sbatch_refusal(crashed) is None and sbatch_refusal(RuntimeError("no cause")) is None


def test_srun_tasks_become_torchruns_variables(slurm_cluster: SlurmCluster) -> None:
    step = {
        "SLURM_STEP_ID": "0",
        "SLURM_PROCID": "3",
        "SLURM_NTASKS": "4",
        "SLURM_LOCALID": "1",
        "SLURM_NTASKS_PER_NODE": "2",
        "SLURM_STEP_NODELIST": "gpu[07-08]",
        "SLURM_JOB_ID": "12345",
    }
    assert srun_task_env(step) == {
        "RANK": "3",
        "WORLD_SIZE": "4",
        "LOCAL_RANK": "1",
        "LOCAL_WORLD_SIZE": "2",
        "MASTER_ADDR": "gpu07",
        "MASTER_PORT": "32345",
    }
    assert srun_task_env({**step, "MASTER_PORT": "29500"})["MASTER_PORT"] == "29500"
    assert srun_task_env({**step, "WORLD_SIZE": "8"}) == {}  # torchrun's own variables win
    assert srun_task_env({k: v for k, v in step.items() if k != "SLURM_STEP_ID"}) == {}  # the batch script itself
    assert srun_task_env({**step, "SLURM_NTASKS": "1"}) == {}  # one task: no process group


@pytest.mark.soak  # CI: a shorter test covers the same promise; run with `pytest -m soak`
def test_scancel_usr2_requeues_the_job_and_it_ends_bit_for_bit(
    slurm_cluster: SlurmCluster, tmp_path: Path, start_sweep: Callable[..., subprocess.Popen]
) -> None:
    """`scancel --signal=USR2`, what SLURM sends ahead of a time limit or preemption: the job commits, submitit
    requeues it (counting a timeout), and the requeued job resumes in the same run directory."""
    golden.start_golden(tmp_path, LONG)
    sweep = tmp_path / "sweep"
    launcher = start_sweep(sweep, *LONG, "hydra.launcher.timeout_min=5", "hydra.launcher.max_num_timeout=3")
    job = job_id(sweep, launcher)
    wait_for_step(sweep / "0", 5)
    slurm_cluster.command("scancel", "--signal=USR2", job)
    finish(launcher)
    log = job_log(sweep, job)
    assert "SIGUSR2: finishing this step" in log and f"Requeued job {job} (2 remaining timeouts)" in log, log
    stopped_at = int(log.split("stopped at step ")[1].split()[0])
    assert 5 <= stopped_at < 150 and f"resuming {sweep / '0'} from step_{stopped_at:08d}" in log
    assert slurm_cluster.restarts(job) == 1
    assert json.loads((sweep / "0" / "status.json").read_text())["status"] == "completed"
    golden.assert_same(golden.golden_run(tmp_path, LONG), sweep / "0", "scancel --signal=USR2")


@pytest.mark.soak
def test_scontrol_requeue_stops_the_job_and_it_ends_bit_for_bit(
    slurm_cluster: SlurmCluster, tmp_path: Path, start_sweep: Callable[..., subprocess.Popen]
) -> None:
    """`scontrol requeue`, what an admin or a preempting job does: SLURM sends SIGTERM, the job commits and exits,
    SLURM starts it again and it resumes in the same run directory (no timeout counted)."""
    golden.start_golden(tmp_path, LONG)
    sweep = tmp_path / "sweep"
    launcher = start_sweep(sweep, *LONG, "hydra.launcher.max_num_timeout=0")
    job = job_id(sweep, launcher)
    wait_for_step(sweep / "0", 5)
    slurm_cluster.command("scontrol", "requeue", job)
    finish(launcher)
    log = job_log(sweep, job)
    assert "SIGTERM: finishing this step" in log, log
    stopped_at = int(log.split("stopped at step ")[1].split()[0])
    assert 5 <= stopped_at < 150 and f"resuming {sweep / '0'} from step_{stopped_at:08d}" in log
    assert slurm_cluster.restarts(job) == 1
    golden.assert_same(golden.golden_run(tmp_path, LONG), sweep / "0", "scontrol requeue")


@pytest.mark.soak
def test_a_time_limit_mid_run_requeues_until_the_run_ends_bit_for_bit(
    slurm_cluster: SlurmCluster, tmp_path: Path, start_sweep: Callable[..., subprocess.Popen]
) -> None:
    """A two-minute time limit, SIGUSR2 60 s ahead of it (SLURM checks every 30 s): every attempt commits, is
    requeued as a timeout and resumes, within max_num_timeout, until the run ends as one that was never stopped."""
    args = [
        *[a for a in LONG if not a.startswith(("trainer.max_steps=", "trainer.eval_every="))],
        "trainer.max_steps=3000",
        "trainer.eval_every=500",
    ]
    golden.start_golden(tmp_path, args)
    sweep = tmp_path / "sweep"
    launcher = start_sweep(
        sweep,
        *args,
        "hydra.launcher.timeout_min=2",
        "hydra.launcher.signal_delay_s=60",
        "hydra.launcher.max_num_timeout=20",
    )
    job = job_id(sweep, launcher)
    finish(launcher, timeout=1500)
    log = job_log(sweep, job)
    timeouts = log.count("Requeued job ")  # submitit's INFO lines, on stdout only
    assert timeouts >= 1 and slurm_cluster.restarts(job) == timeouts, log
    assert f"Requeued job {job} ({20 - timeouts} remaining timeouts)" in log and "this job is preempted" not in log
    assert "DUE TO TIME LIMIT" not in log  # the signal came ahead of the limit every time
    assert log.count(f"resuming {sweep / '0'} from") == timeouts
    golden.assert_same(golden.golden_run(tmp_path, args), sweep / "0", "time limit")


@pytest.mark.soak
def test_past_max_num_timeout_the_job_is_not_requeued_and_the_same_command_finishes_it(
    slurm_cluster: SlurmCluster, tmp_path: Path, start_sweep: Callable[..., subprocess.Popen]
) -> None:
    golden.start_golden(tmp_path, LONG)
    sweep = tmp_path / "sweep"
    overrides = [*LONG, "hydra.launcher.timeout_min=5", "hydra.launcher.max_num_timeout=1"]
    launcher = start_sweep(sweep, *overrides)
    job = job_id(sweep, launcher)
    wait_for_step(sweep / "0", 5)
    slurm_cluster.command("scancel", "--signal=USR2", job)  # the first timeout: requeued
    deadline = time.time() + 180
    while f"resuming {sweep / '0'} from" not in job_log(sweep, job) and time.time() < deadline:
        time.sleep(0.2)
    wait_for_step(sweep / "0", 60)
    slurm_cluster.command("scancel", "--signal=USR2", job)  # the second: one more than max_num_timeout
    out, err = launcher.communicate(timeout=400)
    assert launcher.returncode == 75, f"exit {launcher.returncode}\n{out[-3000:]}\n{err[-3000:]}"  # EX_TEMPFAIL
    assert "1 sweep job(s) stopped with a checkpoint and were not requeued: run the same command" in err
    log = job_log(sweep, job)
    assert f"Requeued job {job} (0 remaining timeouts)" in log and "timed-out too many times" in log, log
    assert slurm_cluster.restarts(job) == 1
    status = json.loads((sweep / "0" / "status.json").read_text())
    assert status["status"] == "preempted" and "did not requeue the job" in status["error"], status
    assert "preempted" in out  # the summary's row
    finish(start_sweep(sweep, *overrides))  # the same command: the job resumes from its checkpoint
    golden.assert_same(golden.golden_run(tmp_path, LONG), sweep / "0", "past max_num_timeout, then rerun")


@pytest.mark.soak
def test_two_tasks_per_node_train_ddp_equal_to_torchrun_and_requeue_bit_for_bit(
    slurm_cluster: SlurmCluster, tmp_path: Path, start_sweep: Callable[..., subprocess.Popen]
) -> None:
    """tasks_per_node=2: srun starts two ranks that form the process group from SLURM_PROCID, SLURM_NTASKS,
    SLURM_LOCALID and the node list; stopped by SIGUSR2 and requeued, the job ends equal to torchrun's 2 ranks."""
    reference = tmp_path / "torchrun"
    torchrun = start_torchrun(reference)
    sweep = tmp_path / "sweep"
    launcher = start_sweep(sweep, *LONG, "hydra.launcher.tasks_per_node=2", "hydra.launcher.timeout_min=5")
    job = job_id(sweep, launcher)
    wait_for_step(sweep / "0", 5)
    slurm_cluster.command("scancel", "--signal=USR2", job)
    finish(launcher)
    finish_torchrun(torchrun)
    log = job_log(sweep, job)
    assert "x 2 processes" in log and f"Requeued job {job}" in log and "resuming" in log, log
    assert "Traceback" not in log  # rank 1 leaves without waiting for rank 0 at a closing barrier
    assert slurm_cluster.restarts(job) == 1
    golden.assert_same(reference, sweep / "0", "tasks_per_node=2 against torchrun")


@pytest.mark.soak
def test_an_sbatch_script_of_srun_tasks_requeues_itself_on_exit_75(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    """Without submitit: `srun python -m lmpt` under `--ntasks-per-node=2` forms the process group from SLURM's
    variables; stopped, it exits with 75, the script requeues the job and it ends equal to torchrun's 2 ranks."""
    reference = tmp_path / "torchrun"
    torchrun = start_torchrun(reference)
    run = tmp_path / "run"
    script = tmp_path / "job.sh"
    script.write_text(
        "#!/bin/bash\n"
        f"#SBATCH --ntasks-per-node=2 --requeue --open-mode=append --output={tmp_path / 'job.out'}\n"
        f"srun {' '.join(lmpt_command(*LONG, f'hydra.run.dir={run}'))}\n"
        'code=$?; echo "srun exit $code"\n'
        "if [ $code -eq 75 ]; then scontrol requeue $SLURM_JOB_ID; fi\n"
    )
    submitted = subprocess.run(
        ["sbatch", "--parsable", str(script)],
        cwd=tmp_path,
        env=golden.env(),
        capture_output=True,
        text=True,
        check=True,
    )
    job = submitted.stdout.strip()
    wait_for_step(run, 5)
    slurm_cluster.command("scancel", "--signal=USR2", job)
    deadline = time.time() + 600
    while slurm_cluster.job_state(job) in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "REQUEUED"):
        assert time.time() < deadline, "the job did not end"
        time.sleep(1)
    assert slurm_cluster.job_state(job) == "COMPLETED"
    finish_torchrun(torchrun)
    log = (tmp_path / "job.out").read_text()
    assert "x 2 processes" in log and "srun exit 75" in log and "srun exit 0" in log and "resuming" in log, log
    assert slurm_cluster.restarts(job) == 1 and "Traceback" not in log
    golden.assert_same(reference, run, "srun tasks in an sbatch script")
