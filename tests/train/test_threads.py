"""A run takes the threads of its slot, or of the cores free of other work, and its start line says how many and why:
two runs side by side on 2 cores each taking both crawled 10-25 times slower than one alone. The choice is unit
tested with injected cores and load; the real runs pin their process to one core and leave the load to chance (the
count there is 1 whatever the load)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from lmpt.cores import busy_cores, usable_cores
from lmpt.errors import LmptError
from lmpt.train.placement import choose_threads
from tests.runner import REPO, SMALL, lmpt_command, lmpt_env, run_lmpt


def _choose(env: dict[str, str], cores: int = 4, busy: float | None = 0.0):
    return choose_threads(env, cores=lambda: cores, busy=lambda: busy)


def test_the_free_cores_are_taken_and_said() -> None:
    assert _choose({}, cores=4, busy=1.2).count == 3
    assert _choose({}, cores=2, busy=1.0).describe().startswith("1 thread (2 cores, 1 busy with other work")
    assert _choose({}, cores=4, busy=0.1).count == 4 and "all free" in _choose({}, busy=0.1).why
    assert _choose({}, cores=2, busy=7.5).count == 1  # at least one, however loaded
    assert _choose({}, cores=3, busy=None).describe() == "3 threads (3 cores, their load unknown)"


def test_a_forced_count_wins_over_the_users_omp_setting_and_the_cores() -> None:
    assert _choose({"LMPT_THREADS": "3", "OMP_NUM_THREADS": "1"}, cores=1, busy=1.0).describe() == (
        "3 threads (LMPT_THREADS=3)"
    )
    assert _choose({"OMP_NUM_THREADS": "2"}, cores=8).describe() == "2 threads (OMP_NUM_THREADS=2)"
    assert _choose({"LMPT_THREADS": "", "OMP_NUM_THREADS": ""}, cores=4).count == 4  # empty is unset


@pytest.mark.parametrize("value", ["0", "-1", "two", "1.5", "²", "1²"])
def test_a_bad_forced_count_is_refused_in_one_line(value: str) -> None:
    with pytest.raises(LmptError, match=f"LMPT_THREADS='{value}' is not a thread count"):
        _choose({"LMPT_THREADS": value})


def test_the_busy_cores_are_measured_on_this_machine() -> None:
    busy = busy_cores(0.05)
    assert busy is not None and 0.0 <= busy <= usable_cores() + 0.5  # rounding of the kernel's ticks


def _pinned_env(**extra: str) -> dict[str, str]:
    """The test runner's environment without its thread settings (a run chooses its own), plus `extra`."""
    env = lmpt_env()
    env.pop("OMP_NUM_THREADS", None)
    env.pop("LMPT_THREADS", None)
    return {**env, **extra}


def _on_one_core() -> None:
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


def _start_line(cwd: Path, **extra: str) -> str:
    args = [*SMALL, "trainer.max_steps=2", "trainer.eval_batches=1", "trainer.sample_tokens=0"]
    done = subprocess.run(
        lmpt_command(*args),
        cwd=cwd,
        env=_pinned_env(**extra),
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=_on_one_core,
    )
    assert done.returncode == 0, done.stderr
    return next(line for line in done.stdout.splitlines() if "parameters)" in line)


def test_a_run_pinned_to_one_core_takes_one_thread_and_says_so(tmp_path: Path) -> None:
    line = _start_line(tmp_path)
    assert "on cpu with 1 thread (1 core" in line, line
    probe = (
        "from lmpt.train.placement import take_threads; import torch; take_threads(); print(torch.get_num_threads())"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=REPO,
        env=_pinned_env(),
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_on_one_core,
    )
    assert done.stdout.strip() == "1", done.stderr  # set in torch, not only said


def test_a_forced_count_wins_in_a_real_run(tmp_path: Path) -> None:
    assert "on cpu with 2 threads (LMPT_THREADS=2)" in _start_line(tmp_path, LMPT_THREADS="2")


def test_a_bad_forced_count_stops_the_run_in_one_line(tmp_path: Path) -> None:
    done = run_lmpt(*SMALL, "trainer.max_steps=2", cwd=tmp_path, env=_pinned_env(LMPT_THREADS="0"))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("lmpt: error: LMPT_THREADS='0' is not a thread count")


def test_deterministic_mode_fixes_cublas_workspace_so_cuda_matmuls_are_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    """On CUDA, PyTorch's deterministic mode raises on the first matmul unless CUBLAS_WORKSPACE_CONFIG is set:
    trainer.deterministic=true sets it (the user's own value kept), and the run's threads come back with the place."""
    from lmpt.config.schema import TrainerConfig
    from lmpt.train.distributed import Distributed
    from lmpt.train.placement import CUBLAS_WORKSPACE, place_job

    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    monkeypatch.setenv("LMPT_THREADS", str(torch.get_num_threads()))  # this test process keeps its threads
    try:
        device, _, threads = place_job(TrainerConfig(device="cpu", deterministic=True), Distributed())
        assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == CUBLAS_WORKSPACE and device.type == "cpu"
        assert threads.why == f"LMPT_THREADS={torch.get_num_threads()}"
        monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":16:8")
        place_job(TrainerConfig(device="cpu", deterministic=True), Distributed())
        assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":16:8"
    finally:
        torch.use_deterministic_algorithms(False)
