"""Golden-run helpers: a run that was never stopped, the same command killed and restarted, and a
bit-for-bit comparison of the two (per-step losses as written in metrics.jsonl, final weights)."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import torch
from runner import SMALL, lmpt_command, lmpt_env, run_lmpt
from safetensors.torch import load_file

FAULT_RUNNER = Path(__file__).resolve().with_name("fault_runner.py")

BASE = [
    *[a for a in SMALL if not a.startswith("trainer.sample_tokens=")],
    "trainer.sample_tokens=0",
    "trainer.max_steps=16",
    "trainer.ckpt_every=4",
    "trainer.log_every=1",
    "trainer.eval_every=8",
    "trainer.eval_batches=2",
    "trainer.keep_last=2",
    "trainer.device=cpu",
    "model.n_layers=2",
    "model.d_model=64",
    "model.n_heads=2",
    "model.ffn_dim=128",
]
"""16 tiny steps of a 2-layer model, a checkpoint every 4, a loss every step, a validation every 8."""

KILLED = -signal.SIGKILL

_golden: dict[tuple, Path] = {}
_pending: dict[tuple, tuple[Path, subprocess.Popen]] = {}


def env(**extra: str) -> dict[str, str]:
    """lmpt's environment, one thread per process: the 2 shared cores are not oversubscribed (a 20x slowdown)."""
    return lmpt_env(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", **extra)


def run(
    run_dir: Path, args: list[str], timeout: float = 300, own_process: bool = False, **fault_env: str
) -> subprocess.CompletedProcess:
    """The command in `run_dir`: called in this process, or a process of its own (`own_process`; the fault runner's
    when faults are asked for: it kills itself at the fault, and a restart here resumes what it left)."""
    argv = [*args, f"hydra.run.dir={run_dir}"]
    if not fault_env and not own_process:
        return run_lmpt(*argv, cwd=run_dir.parent, env=env(), timeout=timeout)
    return subprocess.run(
        [sys.executable, str(FAULT_RUNNER), *argv] if fault_env else lmpt_command(*argv),
        cwd=run_dir.parent,
        env=env(**fault_env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def describe(result: subprocess.CompletedProcess) -> str:
    return f"exit {result.returncode}\n--- stdout\n{result.stdout[-3000:]}\n--- stderr\n{result.stderr[-3000:]}"


def _golden_key(args: list[str], fault_env: dict[str, str]) -> tuple:
    return (*args, *sorted(fault_env.items()))


def start_golden(tmp: Path, args: list[str], **fault_env: str) -> None:
    """Start the golden run of `args` with faults in the background (one CPU thread), to overlap with a killed run;
    one without faults is made in this process when it is first asked for."""
    key = _golden_key(args, fault_env)
    if fault_env and key not in _golden and key not in _pending:
        run_dir = tmp / f"golden-{len(_golden) + len(_pending)}"
        command = [sys.executable, str(FAULT_RUNNER), *args, f"hydra.run.dir={run_dir}"]
        process = subprocess.Popen(
            command, cwd=tmp, env=env(**fault_env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        _pending[key] = (run_dir, process)


def golden_run(tmp: Path, args: list[str], **fault_env: str) -> Path:
    """The run directory of `args` never stopped (made once per configuration and test session)."""
    key = _golden_key(args, fault_env)
    if key not in _golden and not fault_env:
        run_dir = tmp / f"golden-{len(_golden) + len(_pending)}"
        result = run(run_dir, args)
        assert result.returncode == 0, describe(result)
        _golden[key] = run_dir
    if key not in _golden:
        start_golden(tmp, args, **fault_env)
        run_dir, process = _pending.pop(key)
        out, err = process.communicate(timeout=600)
        result = subprocess.CompletedProcess(process.args, process.returncode, out, err)
        assert result.returncode == 0, describe(result)
        _golden[key] = run_dir
    return _golden[key]


def interrupted_run(
    tmp: Path,
    args: list[str],
    kill_points: list[dict[str, str]],
    name: str = "killed",
    shared_env: dict[str, str] | None = None,
    final_env: dict[str, str] | None = None,
) -> Path:
    """Start the command, kill it (SIGKILL) at each fault in turn (one process per entry of `kill_points`,
    e.g. {"LMPT_TEST_KILL_AFTER_BACKWARD": "6"}), then run the same command until it finishes. `shared_env`
    goes to every process (e.g. NaN steps), `final_env` to the last one only (e.g. a trace)."""
    run_dir = tmp / name
    shared = shared_env or {}
    for i, faults in enumerate(kill_points):
        result = run(run_dir, args, **shared, **faults)
        assert result.returncode == KILLED, f"process {i} with {faults} was not killed: {describe(result)}"
        assert not (run_dir / "model.safetensors").exists()
    result = run(run_dir, args, **shared, **(final_env or {}))
    assert result.returncode == 0, f"restart after {kill_points} failed: {describe(result)}"
    return run_dir


def resume_copy(source: Path, dest: Path, args: list[str], **fault_env: str) -> Path:
    """Copy a killed run directory and finish the copy (optionally with faults, e.g. a dropped state piece)."""
    shutil.copytree(source, dest)
    result = run(dest, args, **fault_env)
    assert result.returncode == 0, describe(result)
    assert "resuming" in result.stdout, describe(result)
    return dest


def records(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line]


def logged_losses(run_dir: Path) -> list[tuple[int, str, float]]:
    """Every loss line of metrics.jsonl in order, duplicates included: (step, "loss" | "val_loss", value)."""
    return [(r["step"], key, r[key]) for r in records(run_dir) for key in ("loss", "val_loss") if key in r]


def final_weights(run_dir: Path) -> dict[str, torch.Tensor]:
    return load_file(run_dir / "model.safetensors")


def differences(a: Path, b: Path) -> list[str]:
    """What differs between two finished runs, bit for bit (empty when they are the same)."""
    found = []
    la, lb = logged_losses(a), logged_losses(b)
    if la != lb:
        diff = [f"{x} != {y}" for x, y in zip(la, lb, strict=False) if x != y][:4]
        found.append(f"logged losses differ ({len(la)} vs {len(lb)} lines; first differences: {diff})")
    wa, wb = final_weights(a), final_weights(b)
    if wa.keys() != wb.keys():
        found.append("model.safetensors holds different tensors")
    else:
        unequal = [k for k in wa if not torch.equal(wa[k], wb[k])]
        if unequal:
            found.append(f"{len(unequal)} of {len(wa)} weight tensors differ, e.g. {unequal[:3]}")
    return found


def assert_same(a: Path, b: Path, context: str = "") -> None:
    """Same per-step train and validation losses as written, same final weights, bit for bit."""
    problems = differences(a, b)
    assert not problems, f"{context}: {a.name} vs {b.name}: " + "; ".join(problems)
    expected_steps = sorted({s for s, key, _ in logged_losses(a) if key == "loss"})
    assert [s for s, key, _ in logged_losses(b) if key == "loss"] == expected_steps, "a step logged twice or never"
