"""The study's dry run: every run the plan would launch, sized and timed, and the whole study's time.

`lmpt-study trainer.dry_run=true` prints the study's plan, nothing run or written: every run it would launch (each
objective's search trials, then its final runs at each budget and seed) with its steps, tokens, epochs over the
training text and estimated time on the device its slots find (on CPU slots, each model at its rate measured in
such a slot by a short probe run, cached: lmpt.study.rates; on a GPU, at the utilisation lmpt plans with of its
datasheet peak), its downstream scoring's (lmpt.downstream.run_tasks), and the whole study's time over its slots."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from hydra import compose
from rich.table import Table

from lmpt.console import console, print_whole
from lmpt.study.plan import StudyPlan, at_budget, no_scoring, override_key
from lmpt.study.pool import Slot
from lmpt.train.display import format_duration
from lmpt.train.metrics import ASSUMED_MFU


@dataclass(frozen=True)
class PlannedRun:
    kind: str
    """"search" or "final"."""
    objective: str
    budget: str
    count: int
    """How many such runs: the trials, or the seeds."""
    steps: int
    tokens: float
    epochs: float | None
    at_least: bool
    seconds: float
    scoring_seconds: float
    """Each run's downstream scoring (curve points, the end of the run, the untrained control): 0 for a trial."""


def plan_device(slots: list[Slot]) -> tuple[torch.device, str]:
    """The device the runs will train on, and its name: a GPU when the slots hold one, else this CPU."""
    gpu = any("CUDA_VISIBLE_DEVICES" in slot.env for slot in slots)  # a GPU slot names its device
    if (gpu or len(slots) == 1) and torch.cuda.is_available():  # one slot: the runs take the GPU by themselves
        return torch.device("cuda"), torch.cuda.get_device_name(0)
    return torch.device("cpu"), "this CPU"


def planned_runs(plan: StudyPlan, device: torch.device, slot: Slot | None = None) -> list[PlannedRun]:
    """Each objective's trials at the search budget, then its finals at each budget (sized as `lmpt` sizes them).
    On a CPU slot (`slot`), each run's time is its FLOPs at its model's rate measured in such a slot
    (lmpt.study.rates); on a GPU, at ASSUMED_MFU of the GPU's peak."""
    from lmpt.downstream.run_tasks import scoring_flops
    from lmpt.study import rates
    from lmpt.train.plan import estimate_run, sized_run
    from lmpt.train.precision import bf16_pays_on_cpu
    from lmpt.train.spec import resolve

    runs = []
    for objective in plan.objectives:
        for kind, budget, count in [
            ("search", plan.search_budget, plan.trials),
            *(("final", b, len(plan.seeds)) for b in plan.budgets),
        ]:
            overrides = [*at_budget(plan.run_overrides, budget), f"objective={objective}"]
            if kind == "search":
                overrides += no_scoring(plan.run_overrides)  # as a trial launches
            cfg = compose(config_name="config", overrides=overrides)
            amp = cfg.trainer.amp and (device.type == "cuda" or bf16_pays_on_cpu(int(cfg.model.d_model)))
            dtype = torch.bfloat16 if amp else torch.float32
            spec = resolve(cfg, {override_key(o) for o in overrides})
            estimate = estimate_run(spec, device, dtype)
            objective_built, model, _, cost, *_ = sized_run(spec, device, dtype)
            scoring = scoring_flops(spec.downstream, objective_built, spec.objective, model, estimate.steps)
            seconds, per_flop = estimate.seconds, cost.seconds / cost.flops  # at ASSUMED_MFU of the peak
            rate = rates.measured_rate(overrides, slot.env, slot.cores) if slot is not None else None
            if rate is not None:
                seconds, per_flop = rate.seconds(estimate.flops), 1 / rate.flops_per_s
            runs.append(
                PlannedRun(
                    kind,
                    objective,
                    budget,
                    count,
                    estimate.steps,
                    estimate.tokens,
                    estimate.epochs,
                    estimate.at_least,
                    seconds,
                    scoring * per_flop,  # at the rate training is planned at
                )
            )
    return runs


def print_study_plan(plan: StudyPlan, slots: list[Slot]) -> float:
    """Print the plan; returns the study's estimated hours of wall time over its slots."""
    device, name = plan_device(slots)
    measured = plan.probe and device.type == "cpu" and bool(slots) and slots[0].name != "SLURM"
    runs = planned_runs(plan, device, slots[0] if measured else None)
    table = Table(title=f"study plan (dry run: nothing trained or written) on {name}", title_justify="left")
    for column in ("runs", "objective", "budget", "steps", "tokens", "epochs", "training", "scoring"):
        table.add_column(column, justify="right" if column in ("steps", "tokens") else "left")
    for run in runs:
        what = f"{run.count} trial{'s' * (run.count != 1)}" if run.kind == "search" else f"{run.count} seed(s)"
        epochs = f"{'≥' * run.at_least}{run.epochs:.2f}" if run.epochs is not None else "unknown"
        table.add_row(
            what,
            run.objective,
            run.budget,
            f"{run.steps:,}",
            f"{run.tokens:,.0f}",
            epochs,
            format_duration(run.seconds),
            format_duration(run.scoring_seconds) if run.scoring_seconds else "-",
        )
    print_whole(table)  # a piped plan keeps every column whole
    if any(run.at_least for run in runs):
        console.print(
            "≥: the text is not tokenised yet; data.max_tokens caps it, so the runs repeat it at least this often",
            markup=False,
        )
    if any(run.epochs is None for run in runs):
        console.print(
            "epochs unknown: the training text is not tokenised yet (lmpt-prepare with the same data keys "
            "tokenises it; the plan then counts them)",
            markup=False,
        )
    training = sum(run.seconds * run.count for run in runs)
    scoring = sum(run.scoring_seconds * run.count for run in runs)
    wall = (training + scoring) / max(1, len(slots))
    console.print(
        f"{sum(r.count for r in runs)} runs: {format_duration(training)} of training and {format_duration(scoring)} of "
        f"downstream scoring (their untrained controls' included), "
        + (
            "each model at its rate measured in a slot here"
            if measured
            else f"at {ASSUMED_MFU:.0%} of the peak of {name}"
        )
        + f"; over {len(slots)} slot{'s' * (len(slots) != 1)}: about {format_duration(wall)}. The runs would go "
        f"to {plan.directory}.",
        markup=False,
    )
    return wall / 3600
