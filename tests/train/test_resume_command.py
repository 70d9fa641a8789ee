"""Resume in one command and one run per directory, end to end: a graceful stop prints the command that resumes,
that command composes the run's own configuration, and a second process in a running run's directory is refused
in one line naming the holder's PID, before it writes anything there."""

from __future__ import annotations

import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf
from runner import SMALL, lmpt_command, lmpt_env, records, run_lmpt, wait_for_step

from lmpt.errors import LmptError
from lmpt.rundir.directory import lock_run_dir, release_run_dirs

ORIGINAL = [
    *SMALL,
    "model.n_layers=1",
    "trainer.seed=7",
    "optimizer.lr=2e-3",
    "trainer.max_steps=400",
    "trainer.log_every=1",
    "trainer.eval_every=0",
    "trainer.ckpt_every=1000",
]


def snapshot(run: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in [*(run / ".hydra").iterdir(), run / "config.yaml"]}


def test_one_process_per_run_and_the_stop_message_resumes_it(tmp_path: Path) -> None:
    run = tmp_path / "run"
    first = subprocess.Popen(
        lmpt_command(*ORIGINAL, f"hydra.run.dir={run}"),
        cwd=tmp_path,
        env=lmpt_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for_step(run, 2)
        before = snapshot(run)
        for second in (["trainer.seed=8", f"hydra.run.dir={run}"], [f"trainer.resume={run}"]):
            result = run_lmpt(*SMALL, *second, cwd=tmp_path)
            assert result.returncode == 2, result.stderr
            assert result.stderr.strip().splitlines() == [
                f"lmpt: error: {run} is in use by another lmpt process (PID {first.pid}): wait for it to end or stop "
                "it, or give this run its own hydra.run.dir"
            ]
        assert snapshot(run) == before  # the refused process wrote nothing, not even Hydra's record
        first.send_signal(signal.SIGTERM)
        out, err = first.communicate(timeout=120)
    finally:
        first.kill()
    assert first.returncode == 75, err
    (line,) = [line for line in out.splitlines() if line.startswith("to resume: ")]
    command = line.removeprefix("to resume: ").split(" (exit code")[0]
    assert shlex.split(command) == ["lmpt", f"trainer.resume={run}"]
    stopped = max(r["step"] for r in records(run))

    result = run_lmpt(*shlex.split(command)[1:], f"trainer.max_steps={stopped + 2}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    steps = [r["step"] for r in records(run) if "loss" in r]
    assert steps == list(range(1, stopped + 3))  # every step once, continued where the stop left it
    saved = OmegaConf.load(run / "config.yaml")
    assert (saved.model.n_layers, saved.trainer.seed, saved.optimizer.lr) == (1, 7, 2e-3)  # the run's own config
    assert saved.trainer.max_steps == stopped + 2 and saved.trainer.resume == "auto"  # the latest allowed settings
    assert snapshot(run)["overrides.yaml"] == before["overrides.yaml"]  # .hydra/ records the launch that started it


def test_the_lock_goes_with_the_process(tmp_path: Path) -> None:
    hold = (
        "from pathlib import Path; from lmpt.rundir.directory import lock_run_dir; "
        f"lock_run_dir(Path({str(tmp_path)!r}))"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", f"{hold}; print('held', flush=True); input()"],
        env=lmpt_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(LmptError, match=rf"in use by another lmpt process \(PID {holder.pid}\)"):
            lock_run_dir(tmp_path)
    finally:
        holder.kill()  # as kill -9 would: no clean-up runs
        holder.wait()
    lock_run_dir(tmp_path)  # the kernel released the dead holder's lock
    release_run_dirs()
