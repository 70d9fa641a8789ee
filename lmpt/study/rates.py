"""What a run costs on this machine, measured: a short probe run of each model a plan holds, its rate cached.

A plan's time (lmpt-study's dry run, lmpt-reproduce's) is each run's training FLOPs at its model's measured rate
plus its measured fixed seconds, over the slots. The rate is not a share of a matmul peak: small models on a CPU
reach 2% of it, not 40%, and the share differs by model, precision and machine (issue 63, point 8).

The probe is a real lmpt run of the run keys that shape a step (SHAPE_KEYS: objective, model, vocabulary, window,
batch, precision) for PROBE_STEPS steps in a slot as the plan's runs get (its threads and cores), on the bundled
tiny-Shakespeare text with no downstream scoring: the step's cost does not depend on the text, and the probe reads
and writes nothing of the user's (its tokenizer and token cache live in the cache directory's `probe/`). Its rate is
training FLOPs (lmpt's count, the plan's) per second of its steps after the first SKIP_STEPS (allocation, first
kernels); its overhead the rest of its wall time (the process's start, loading, the final evaluation). Both are
cached per machine (CPU or GPU model, threads, torch) and shape in `run_rates.json`; a later probe of the same shape
keeps the faster rate (one taken on a busy machine reads low)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from lmpt.console import info, warn
from lmpt.cores import busy_cores, usable_cores
from lmpt.errors import LmptError
from lmpt.report.runs import read_records
from lmpt.rundir.directory import METRICS_FILE
from lmpt.train.matmul_peak import device_name
from lmpt.train.measurement_cache import MeasurementCache
from lmpt.train.placement import BUSY_ROUNDING

RATES = MeasurementCache(
    "run_rates.json",
    "rates",
    valid=lambda entry: (
        isinstance(entry, dict)
        and isinstance(entry.get("flops_per_s"), (int, float))
        and entry["flops_per_s"] > 0
        and isinstance(entry.get("overhead_s"), (int, float))
        and entry["overhead_s"] >= 0
    ),
    score=lambda entry: entry["flops_per_s"],
)
"""The cached rates, in the cache directory: {"rates": {key: {"flops_per_s": F, "overhead_s": S, "shape": ...}}}."""

PROBE_STEPS, SKIP_STEPS, LOG_EVERY = 60, 10, 2
"""The probe's steps, the first ones left out of its rate, and its metrics' interval."""

PROBE_LIMIT_S = 45.0
"""The most seconds a probe runs: a model too slow for PROBE_STEPS in that time is stopped there and measured over
the steps it logged (its overhead then leaves out the final evaluation it did not reach)."""

SHAPE_KEYS = frozenset(
    {
        "objective",
        "model",
        "tokenizer.vocab_size",
        "data.seq_len",
        "trainer.batch_size",
        "trainer.grad_accum",
        "trainer.amp",
        "trainer.precision",
        "trainer.compile",
        "trainer.strategy",
    }
)
"""Run keys that shape a training step (with every objective.* and model.* key); the rest (seed, length, learning
rate and schedule, the corpus and how much of it) leave a step's cost as it is."""


@dataclass(frozen=True)
class Rate:
    flops_per_s: float
    """Training FLOPs (lmpt's count) a second of training steps."""
    overhead_s: float
    """A run's seconds beyond its steps: its process's start, loading, its final evaluation."""

    def seconds(self, flops: float) -> float:
        """A run of `flops` training FLOPs, start to end."""
        return flops / self.flops_per_s + self.overhead_s


def shape_of(keys: list[str]) -> list[str]:
    """The run keys among `keys` that shape a step (SHAPE_KEYS, objective.*, model.*), in their order."""
    named = [(k.split("=", 1)[0].lstrip("+~"), k) for k in keys]
    return [k for key, k in named if key in SHAPE_KEYS or key.startswith(("objective.", "model."))]


def machine(env: dict[str, str]) -> str:
    """What a rate depends on beyond the shape: the device's model, the slot's threads, torch."""
    if env.get("CUDA_VISIBLE_DEVICES") and torch.cuda.is_available():
        where = f"{device_name('cuda')} x {env.get('LMPT_THREADS', 'all')} host threads"
    else:
        where = f"{device_name('cpu')} x {env.get('LMPT_THREADS', os.cpu_count())} threads"
    return f"{where} | torch {torch.__version__}"


def rate_key(shape: list[str], env: dict[str, str]) -> str:
    text = machine(env) + " | " + " ".join(shape)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def rate_from_records(records: list[dict], wall_s: float, finished: bool = True, skip: int = SKIP_STEPS) -> Rate:
    """The rate and overhead a probe's metrics.jsonl `records` and its `wall_s` show (module docstring). A probe
    stopped at PROBE_LIMIT_S (`finished` False) is measured over the steps it logged after the first (`skip` is
    then 1), the step it was in when stopped counted at their mean time."""
    steps = [r for r in records if "interval_s" in r and "flops" in r]
    skip = skip if finished else min(skip, 1)
    timed = [r for r in steps if r["step"] > skip]
    if not timed:
        raise LmptError(f"the probe logged no timed step in {wall_s:.0f} s")
    before = max((r["flops"] for r in steps if r["step"] <= skip), default=0.0)
    seconds = sum(r["interval_s"] for r in timed)
    rate = (timed[-1]["flops"] - before) / seconds
    stopped_in = 0.0 if finished else seconds / len(timed) / 2
    return Rate(rate, max(0.0, wall_s - sum(r["interval_s"] for r in steps) - stopped_in))


def probe_command(shape: list[str], run_dir: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "lmpt",
        *shape,
        "data=shakespeare",
        f"trainer.max_steps={PROBE_STEPS}",
        f"trainer.log_every={LOG_EVERY}",
        "trainer.eval_every=0",
        "trainer.sample_tokens=0",
        "trainer.progress=plain",
        f"hydra.run.dir={run_dir}",
    ]


def probe(shape: list[str], env: dict[str, str], cores: frozenset[int] | None = None) -> Rate:
    """Run the probe of `shape` in a slot of `env` (pinned to `cores`) and read its rate; LmptError naming the
    probe's last error line when it fails."""
    path = RATES.path()
    probe_cache = (path.parent if path is not None else Path(tempfile.gettempdir())) / "probe"
    child_env = {**os.environ, **env, "LMPT_CACHE_DIR": str(probe_cache)}

    def pin() -> None:
        if cores is not None and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, cores)

    with tempfile.TemporaryDirectory(prefix="lmpt-probe-") as folder:
        run_dir = Path(folder) / "run"
        command = probe_command(shape, run_dir)
        prepare = [sys.executable, "-m", "lmpt.prepare", *command[3:-1]]  # its text tokenised before the clock
        hook: Callable[[], None] | None = pin if sys.platform.startswith("linux") else None
        done = subprocess.run(prepare, env=child_env, capture_output=True, text=True, preexec_fn=hook, cwd=folder)
        if done.returncode != 0:
            raise LmptError(f"the probe's text failed to prepare: {_last_line(done.stderr)}")
        start = time.perf_counter()
        try:
            done = subprocess.run(
                command,
                env=child_env,
                capture_output=True,
                text=True,
                preexec_fn=hook,
                cwd=folder,
                timeout=PROBE_LIMIT_S,
            )
        except subprocess.TimeoutExpired:
            return rate_from_records(read_records(run_dir / METRICS_FILE), time.perf_counter() - start, finished=False)
        wall = time.perf_counter() - start
        if done.returncode != 0:
            raise LmptError(f"the probe run of {' '.join(shape) or 'the defaults'} failed: {_last_line(done.stderr)}")
        return rate_from_records(read_records(run_dir / METRICS_FILE), wall)


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"


def measured_rate(keys: list[str], env: dict[str, str], cores: frozenset[int] | None = None) -> Rate | None:
    """The rate of the model `keys` train, in a slot of `env` on this machine: cached, or probed now (said on the
    console) and cached; None, said in one line, when the probe cannot measure it."""
    shape = shape_of(keys)
    key, path = rate_key(shape, env), RATES.path()
    cached = RATES.read(path).get(key)
    if cached is not None:
        return Rate(float(cached["flops_per_s"]), float(cached["overhead_s"]))
    named = " ".join(shape) or "the defaults"
    busy = _busy(env)
    info(f"measuring a run's rate on this machine: up to {PROBE_STEPS} steps of {named} (once, then cached)")
    try:
        rate = probe(shape, env, cores)
    except LmptError as exc:
        warn(f"no measured rate for {named}: {exc}")
        return None
    if busy is not None:
        warn(f"{busy}: the rate of {named} reads low and is not cached (a dry run on a quiet machine measures it)")
        return rate
    RATES.keep(
        path,
        key,
        {"flops_per_s": rate.flops_per_s, "overhead_s": rate.overhead_s, "shape": shape, "machine": machine(env)},
    )
    return rate


def _busy(env: dict[str, str]) -> str | None:
    """Why a probe now would read low: other work keeping busy more cores than the probe leaves free."""
    others = busy_cores()
    threads = int(env.get("LMPT_THREADS", usable_cores()))
    if others is None or others < usable_cores() - threads + BUSY_ROUNDING:
        return None
    return f"other work keeps {others:.1f} of this machine's {usable_cores()} cores busy"
