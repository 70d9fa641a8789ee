"""Run lmpt's commands as a user would: in the test's own process (`run_lmpt`: its console script's function, with
its own argv, directory, environment and streams, see in_process.py), or as a real process where the test is about
processes (`run_process`: signals, exit codes as a process sees them, kill -9, resume after a kill, torchrun, SLURM,
what an interpreter reads as it starts)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import in_process
import pytest

REPO = Path(__file__).resolve().parents[1]
SMALL = [
    "tokenizer.vocab_size=1024",
    "data.seq_len=64",
    "trainer.batch_size=8",
    "trainer.progress=plain",
    "trainer.sample_tokens=8",
    "scheduler.warmup_steps=5",
]
TINY_MODEL = ["model.d_model=32", "model.n_layers=1", "model.n_heads=2", "model.ffn_dim=64"]
"""A one-block model of width 32: the smallest that trains every objective."""
TINY_RUN = [
    "tokenizer.vocab_size=1024",
    "data.seq_len=64",
    "trainer.batch_size=8",
    "trainer.sample_tokens=0",
    "trainer.progress=plain",
    "trainer.eval_batches=1",
    *TINY_MODEL,
]
"""A run of the tiny model with no sample and one evaluation batch: the downstream and study tests' base."""


def lmpt_env(**extra: str) -> dict[str, str]:
    """The environment of an lmpt command in the tests (the one way to make it): this checkout first on the path,
    Hydra's own error report off, one thread per process, and `extra` on top."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.pop("HYDRA_FULL_ERROR", None)
    env.setdefault("OMP_NUM_THREADS", "1")  # tiny models: threads only fight over 2 shared cores
    env.setdefault("MKL_NUM_THREADS", "1")
    env.update(extra)
    return env


def lmpt_command(*args: str, command: str = "lmpt") -> list[str]:
    """`python -m MODULE ARGS` for console script `command` (`lmpt`: `python -m lmpt`, as torchrun runs it)."""
    module = "lmpt" if command == "lmpt" else in_process.entry_module(command)
    return [sys.executable, "-m", module, *args]


def run_lmpt(
    *args: str,
    cwd: Path,
    env: dict[str, str] | None = None,
    command: str = "lmpt",
    input: str | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess:
    """Console script `command` with `args`, called in this process (default environment: `lmpt_env()`); returns
    what `subprocess.run(..., capture_output=True, text=True)` would."""
    return in_process.call(command, list(args), cwd, lmpt_env() if env is None else env, input, timeout)


def run_process(
    *args: str,
    cwd: Path,
    env: dict[str, str] | None = None,
    command: str = "lmpt",
    input: str | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess:
    """`run_lmpt`, but as a real process of its own."""
    return subprocess.run(
        lmpt_command(*args, command=command),
        cwd=cwd,
        env=lmpt_env() if env is None else env,
        input=input,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def importable(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    """The modules in `folder` first on the command's path, before any of the same names, as PYTHONPATH=`folder`
    puts them for a process: on sys.path and PYTHONPATH for the test, and those names not imported until then."""
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")])))
    names = {p.stem for p in folder.iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()}
    for name in [m for m in sys.modules if m.partition(".")[0] in names]:
        monkeypatch.setitem(sys.modules, name, sys.modules[name])  # put back after the test; gone during it
        del sys.modules[name]
    for name in names:  # what the test imports under these names is gone after it
        monkeypatch.setitem(sys.modules, name, None)
        del sys.modules[name]


def records(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def train_losses(run_dir: Path) -> dict[int, float]:
    return {r["step"]: r["loss"] for r in records(run_dir) if "loss" in r}


def val_losses(run_dir: Path) -> dict[int, float]:
    return {r["step"]: r["val_loss"] for r in records(run_dir) if "val_loss" in r}


def wait_for_step(run_dir: Path, step: int, timeout: float = 120) -> None:
    """Until `run_dir`'s metrics.jsonl has `step` lines (with trainer.log_every=1 and no evaluation: step `step`)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        metrics = run_dir / "metrics.jsonl"
        if metrics.exists() and len(metrics.read_text().splitlines()) >= step:
            return
        time.sleep(0.05)
    raise AssertionError(f"no step {step} within {timeout}s")
