"""A reproduction's grid of runs: its plan with the time it will take, and running it over the study's slots
(lmpt.study.pool, lmpt.study.pool), each run a real `lmpt` process in its own directory. The same command resumes a
killed grid: completed runs are kept, a stopped one continues from its checkpoint, one left training is stopped first
(lmpt.study.pool). The folder is held by one process at a time."""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rich.markup import escape
from rich.table import Table

from lmpt.console import console, print_whole, warn
from lmpt.errors import LmptError
from lmpt.prepare.step import prepare, training_tokens
from lmpt.reproduce.reproduction import PlannedRun, Reproduction, Scale
from lmpt.rundir.directory import read_status
from lmpt.safe_files import write_atomically
from lmpt.study import rates as rates_module
from lmpt.study.pool import (
    Launch,
    LocalPool,
    Slot,
    SlurmPool,
    job_parameters,
    lock_study,
    plan_slots,
    refuse_another_run,
    stop_left_run,
)
from lmpt.study.rates import Rate, shape_of
from lmpt.study.schema import StudyConfig
from lmpt.train.display import format_duration
from lmpt.train.placement import FORCE_VAR

STUDY_KEYS = {"study.slot_device": "device", "study.slots": "slots", "study.launcher": "launcher"}
"""The study's pool keys and the names lmpt-reproduce gives them, for the pool's refusals."""
MEMORY_PER_RUN = 1.0e9
"""Bytes a tiny or micro run holds at most (measured: about 0.45 GB), for the check that the slots fit in memory."""
TIME_FILE = "reproduction.json"
GPU_PEAK = 989e12
"""FLOP/s of the GPU a plan's GPU-hours are stated for: an H100 SXM's dense bf16 peak."""
GPU_UTILISATION = 0.4
"""The share of GPU_PEAK the plan assumes a run reaches (a stated assumption, not a measurement)."""


@dataclass(frozen=True)
class GridPlan:
    folder: Path
    runs: list[PlannedRun]
    done: list[str]
    """The runs already completed (kept on resume)."""
    slots: list[Slot]
    prepared: bool = False
    """The text was tokenised while planning (to count its tokens): the launch need not do it again."""
    jobs: dict | None = None
    """The sbatch options of every job when the runs go to SLURM (None: they run here)."""
    rates: dict[str, Rate] = field(default_factory=dict)
    """Each model's rate on this machine's CPU slots, by its shape (lmpt.study.rates); none for a GPU or SLURM plan."""

    @property
    def gpu_hours(self) -> float:
        """GPU-hours of the runs still to train at GPU_UTILISATION of GPU_PEAK (their FLOPs as lmpt counts them)."""
        return sum(r.flops for r in self.runs if r.name not in self.done) / (GPU_PEAK * GPU_UTILISATION) / 3600

    @property
    def estimate_s(self) -> float:
        """The time the runs still to train will take over this machine's CPU slots, at their models' measured
        rates (lmpt.study.rates); NaN for a plan without them (a GPU's or SLURM's)."""
        left = [r for r in self.runs if r.name not in self.done]
        if any(_shape(r) not in self.rates for r in left):
            return math.nan
        return sum(self.rates[_shape(r)].seconds(r.flops) for r in left) / len(self.slots)


def _shape(run: PlannedRun) -> str:
    return " ".join(shape_of(list(run.keys)))


def measure_rates(runs: list[PlannedRun], slot: Slot) -> dict[str, Rate]:
    """Each model's rate among `runs` in a slot like `slot` (measured once per machine, then cached)."""
    rates: dict[str, Rate | None] = {}
    for run in runs:
        if _shape(run) not in rates:
            rates[_shape(run)] = rates_module.measured_rate(list(run.keys), slot.env, slot.cores)
    return {shape: rate for shape, rate in rates.items() if rate is not None}


def launch_command(folder: Path, run: PlannedRun) -> list[str]:
    return [sys.executable, "-m", "lmpt", *run.keys, "trainer.progress=plain", f"hydra.run.dir={folder / run.name}"]


def completed(path: Path) -> bool:
    return read_status(path).get("status") == "completed"


def plan_grid(
    reproduction: Reproduction,
    folder: Path,
    slots: str,
    max_minutes: float,
    device: str = "cpu",
    launcher: str = "local",
    slurm: dict | None = None,
    dry_run: bool = False,
) -> GridPlan:
    """The grid's plan; one LmptError line when the slots are wrong, when a paper-scale grid would run without a GPU
    or SLURM, or when what is left would take longer than `max_minutes` or hold more memory than the machine has (said
    before anything starts). A dry run is planned at any scale on any machine."""
    study = StudyConfig(slots=slots, slot_device=device, launcher=launcher)
    if dry_run and (device == "gpu" or launcher == "slurm"):
        study = StudyConfig(slots=slots if slots.isdecimal() else "1", slot_device="cpu", launcher="local")
    try:
        slot_list = plan_slots(study)
    except LmptError as exc:  # the pool names the study's keys; this command's are slots=, device=, launcher=
        message = str(exc)
        for study_key, key in STUDY_KEYS.items():
            message = message.replace(study_key, key)
        raise LmptError(message) from None
    gpu = launcher == "slurm" or (bool(slot_list) and "CUDA_VISIBLE_DEVICES" in slot_list[0].env)
    if reproduction.scale is Scale.paper and not gpu and not dry_run:
        raise LmptError(
            f"{reproduction.name} scale=paper trains models of the paper's size: run it where a GPU is (device=gpu) "
            "or on SLURM (launcher=slurm); dry_run=true plans it here"
        )
    jobs = job_parameters(slurm, device == "gpu") if launcher == "slurm" and not dry_run else None
    runs = reproduction.runs()
    for run in runs:  # a folder of another grid's runs (other keys) is never taken for this one's
        refuse_another_run(folder / run.name, launch_command(folder, run), "another grid's run; give another dir=")
    done = [r.name for r in runs if completed(folder / r.name)]
    needed = max((_unique_tokens(run) for run in runs), default=0)
    prepared = bool(needed) and len(done) < len(runs) and not dry_run
    if prepared:
        held = prepare_text(reproduction)
        if held < needed:
            raise LmptError(
                f"{reproduction.name} needs {needed:,} unique training tokens and the text holds {held:,}: give "
                "more text (its data keys) or a smaller grid"
            )
    left = [r for r in runs if r.name not in done]
    timed = dry_run or math.isfinite(max_minutes)  # the time is printed, or checked against max_minutes
    on_cpu = not gpu and reproduction.scale is Scale.laptop and bool(slot_list) and timed
    rates = measure_rates(left, slot_list[0]) if on_cpu else {}
    plan = GridPlan(folder, runs, done, slot_list, prepared, jobs, rates)
    minutes = plan.estimate_s / 60
    if minutes > max_minutes and not gpu and not dry_run:
        raise LmptError(
            f"{reproduction.name} would take about {minutes:.0f} minutes on {len(slot_list)} slot(s), more than "
            f"max_minutes={max_minutes:g}: give fewer seeds, more slots (a bigger machine) or "
            f"max_minutes={minutes:.0f}"
        )
    available = _available_memory()
    if available is not None and MEMORY_PER_RUN * len(slot_list) > available:
        raise LmptError(
            f"{len(slot_list)} runs side by side need about {MEMORY_PER_RUN * len(slot_list) / 1e9:.0f} GB and this "
            f"machine has {available / 1e9:.1f} GB free: give slots={max(1, int(available // MEMORY_PER_RUN))}"
        )
    if len(done) < len(runs) and not dry_run:
        reproduction.check_text()  # text too small for the grid, said before anything trains
    return plan


def _unique_tokens(run: PlannedRun) -> int:
    """The run's data.unique_tokens (0: it trains on all the text)."""
    given = [k.split("=", 1)[1] for k in run.keys if k.startswith("data.unique_tokens=")]
    return int(given[-1]) if given else 0


def _available_memory() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return float(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def print_plan(reproduction: Reproduction, plan: GridPlan) -> None:
    """The dry run: every run, its keys and state, and the time left; nothing is written."""
    title = f"lmpt-reproduce {reproduction.name} scale={reproduction.scale}: {len(plan.runs)} runs"
    table = Table(title=title, title_justify="left")
    for column in ("run", "keys", "FLOPs (lmpt's count)", "FLOPs (the paper's 6ND)", "state"):
        table.add_column(column, justify="right" if column.startswith("FLOPs") else "left")
    for run in plan.runs:
        state = "completed" if run.name in plan.done else "to train"
        paper = f"{run.paper_flops:.2e}" if run.paper_flops else "—"
        table.add_row(run.name, escape(" ".join(run.keys)), f"{run.flops:.2e}", paper, state)
    print_whole(table)
    left = [r for r in plan.runs if r.name not in plan.done]
    console.print(
        f"{len(left)} runs to train: {sum(r.flops for r in left):.3g} FLOPs as lmpt counts them, "
        f"{sum(r.paper_flops for r in left):.3g} in the paper's 6ND; "
        f"{plan.gpu_hours:.3g} GPU-hours at {GPU_UTILISATION:.0%} of an H100's {GPU_PEAK / 1e12:.0f} TFLOP/s (bf16); "
        + (
            f"on this machine's {len(plan.slots)} CPU slot(s) about {format_duration(plan.estimate_s)} (each model "
            "at its rate measured here); "
            if not math.isnan(plan.estimate_s)
            else ""
        )
        + f"into {plan.folder}"
    )


def prepare_text(reproduction: Reproduction) -> int:
    """Tokenise the text once before runs side by side would each do it (lmpt.prepare.step, with the first run's data
    and tokenizer keys, data.unique_tokens aside); the training tokens it holds."""
    keys = [
        k
        for k in reproduction.runs()[0].keys
        if k.split("=")[0].split(".")[0] in ("data", "tokenizer") and not k.startswith("data.unique_tokens=")
    ]
    return prepare_corpus(keys, ",".join(reproduction.grid.get("corpus", [])) or "[]")


def prepare_corpus(keys: Sequence[str], corpus: str) -> int:
    """Tokenise `corpus` (its data and tokenizer `keys`) as lmpt-prepare does; the training tokens it holds. A text
    lmpt-prepare refuses is refused naming `corpus=`, the key of this command that chose it."""
    try:
        prepare(keys)
    except LmptError as exc:
        raise LmptError(f"corpus={corpus} cannot be prepared for this grid: give a longer text ({exc})") from None
    return training_tokens(keys)


def run_grid(reproduction: Reproduction, plan: GridPlan) -> None:
    """Train every run not yet completed over the slots, adding this launch's wall time to the grid's (TIME_FILE). A
    run that fails stops the grid in one line naming its log."""
    plan.folder.mkdir(parents=True, exist_ok=True)
    lock_study(plan.folder)
    stop_left_run(plan.folder)
    started = time.perf_counter()
    queue = [r for r in plan.runs if not completed(plan.folder / r.name)]
    pool = (
        LocalPool(plan.folder, plan.slots) if plan.jobs is None else SlurmPool(plan.folder, len(plan.slots), plan.jobs)
    )
    if queue and len(plan.slots) > 1 and not plan.prepared:
        prepare_text(reproduction)
    total = len(plan.runs)
    finished = total - len(queue)
    number = {r.name: i for i, r in enumerate(plan.runs, 1)}  # a run's place in the grid, the same on every launch
    try:
        while queue or pool.running:
            while queue and pool.free:
                run = queue.pop(0)
                path = plan.folder / run.name
                slot = pool.start(
                    Launch(run.name, path, launch_command(plan.folder, run), str(run.labels.get("objective")))
                )
                console.print(f"[{number[run.name]}/{total}] {run.name} started on {slot}")
            for launch, code in pool.wait():
                if code != 0:
                    raise LmptError(f"run {launch.name} ended with exit code {code}: see {launch.path / 'lmpt.log'}")
                finished += 1
                console.print(f"[{number[launch.name]}/{total}] {launch.name} completed ({finished} of {total} done)")
    except BaseException:
        pool.stop()
        raise
    finally:
        _add_time(plan.folder, time.perf_counter() - started, plan.slots)


def _add_time(folder: Path, seconds: float, slots: list[Slot]) -> None:
    """Keep the wall time over every launch of the grid (a resumed grid adds to it), the machine's cores, and the
    last launch's slots with each slot's threads (a serial slot: lmpt's own choice), written atomically."""
    kept = grid_time(folder)
    kept = {
        "wall_s": kept["wall_s"] + seconds,
        "launches": kept["launches"] + 1,
        "cores": os.cpu_count() or 1,
        "slots": [s.name for s in slots],
        "threads_per_run": slots[0].env.get(FORCE_VAR, "lmpt's default (every core)") if slots else None,
    }
    write_atomically(folder / TIME_FILE, lambda tmp: tmp.write_text(json.dumps(kept)))


def grid_time(folder: Path) -> dict:
    """The grid's wall time and launches so far; a damaged record counts as none (a warning says so)."""
    path = folder / TIME_FILE
    try:
        kept = json.loads(path.read_text()) if path.is_file() else {}
        return {"wall_s": float(kept["wall_s"]), "launches": int(kept["launches"]), **kept}
    except (ValueError, KeyError, TypeError):
        if path.is_file():
            warn(f"{path} is damaged: the grid's earlier wall time is not counted")
        return {"wall_s": 0.0, "launches": 0}
