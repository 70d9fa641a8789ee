"""The final runs of a study: every objective at its chosen recipe at each of the study's budgets, once per seed, each
an ordinary `lmpt` run in a directory of its own (STUDY/runs/BUDGET/OBJECTIVE-seedS) with the downstream tasks scored
when it ends. A completed run (status.json) is not redone; any other is launched again with the same command, which
continues it from its newest checkpoint (lmpt resumes a run directory given again as hydra.run.dir)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from lmpt.console import console
from lmpt.downstream.figures import CHOICE_FIGURES, CLASSIFICATION_FIGURES, CONTROL_FIGURES
from lmpt.errors import LmptError
from lmpt.report.runs import read_run, read_status
from lmpt.study.plan import StudyPlan, at_budget

TASK_FIGURES = (*CHOICE_FIGURES, *CLASSIFICATION_FIGURES, *CONTROL_FIGURES, "n")
"""What study.json keeps of each RUN/downstream/TASK.json (its headline figures; the file keeps the rest)."""


@dataclass(frozen=True)
class FinalRun:
    """One final run, as its directory records it."""

    objective: str
    seed: int
    budget: str
    """trainer.budget of the run, as the study gives it."""
    path: Path
    status: str
    val_loss: float | None
    step: int | None
    flops: float | None
    downstream: dict[str, float]
    """metrics.jsonl's last `downstream/TASK/FIGURE` values."""
    tasks: dict[str, dict[str, Any]]
    """Each RUN/downstream/TASK.json's headline figures, by task."""
    epochs: float | None
    """The epochs over the training text the run logged, when it logged them."""

    def describe(self) -> dict[str, Any]:
        return {"seed": self.seed, "budget": self.budget, "run": str(self.path), "status": self.status,
                "val_loss": self.val_loss, "step": self.step, "flops": self.flops, "epochs": self.epochs,
                "downstream": self.downstream, "tasks": self.tasks}  # fmt: skip


def final_dir(plan: StudyPlan, budget: str, objective: str, seed: int) -> Path:
    return plan.directory / "runs" / budget / f"{objective}-seed{seed}"


def final_command(plan: StudyPlan, budget: str, objective: str, seed: int, recipe: dict[str, str]) -> list[str]:
    """The `lmpt` command of a final run: the command line's run keys (the downstream tasks among them) at
    `budget`, the objective, the seed and the chosen recipe."""
    return [
        sys.executable, "-m", "lmpt", *at_budget(plan.run_overrides, budget), f"objective={objective}",
        f"trainer.seed={seed}", *[f"{key}={value}" for key, value in recipe.items()],
        f"hydra.run.dir={final_dir(plan, budget, objective, seed)}",
    ]  # fmt: skip


def run_final(plan: StudyPlan, budget: str, objective: str, seed: int, recipe: dict[str, str]) -> FinalRun:
    """Train (or continue) the final run of `objective` at `budget` and `seed` unless it completed; returns what it
    recorded."""
    path = final_dir(plan, budget, objective, seed)
    command = final_command(plan, budget, objective, seed, recipe)
    _refuse_another_run(path, command)
    name = f"final {objective} seed {seed} at {budget}"
    if read_status(path).get("status") == "completed":
        console.print(f"{name}: completed, reused")
        return read_final(path, objective, seed, budget)
    console.print(f"{name}: {' '.join(f'{k}={v}' for k, v in recipe.items())} into {path}")
    result = subprocess.run(command)
    if result.returncode in (130, -2):  # Ctrl-C: stop the study; the same command resumes it
        raise KeyboardInterrupt(f"{name} interrupted")
    return read_final(path, objective, seed, budget)


def _refuse_another_run(path: Path, command: list[str]) -> None:
    """A final run directory launched with other run keys (another study's, or a search that chose another recipe
    since) is not reused: the study says so before training anything."""
    overrides_file = path / ".hydra" / "overrides.yaml"
    if not overrides_file.exists():
        return
    given = set(command[3:-1])  # the run keys: the command less `python -m lmpt` and hydra.run.dir
    saved = {str(o) for o in OmegaConf.load(overrides_file)}
    if saved != given:
        differ = sorted(saved ^ given)[:4]
        raise LmptError(f"{path} was launched with other run keys ({', '.join(differ)} differ): it is another "
                        "study's run; pick another study.dir or move it away")  # fmt: skip


def _epochs(path: Path) -> float | None:
    """The epochs over the training text a completed run recorded in its status.json (None for a run that lacks
    them: one completed before lmpt recorded them)."""
    epochs = read_status(path).get("epochs")
    return float(epochs) if isinstance(epochs, int | float) else None


def _task_records(path: Path) -> dict[str, dict[str, Any]]:
    tasks = {}
    for record in sorted((path / "downstream").glob("*.json")):
        try:
            whole = json.loads(record.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(whole, dict):
            tasks[record.stem] = {k: v for k, v in whole.items() if k in TASK_FIGURES}
    return tasks


def read_final(path: Path, objective: str, seed: int, budget: str) -> FinalRun:
    """A final run's status, final val_loss, downstream figures and epochs, from its directory."""
    run = read_run(path)
    status = str(read_status(path).get("status", "incomplete"))
    return FinalRun(objective, seed, budget, path, status, run.val_loss, run.step, run.flops, dict(run.downstream),
                    _task_records(path), _epochs(path))  # fmt: skip
