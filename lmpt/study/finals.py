"""The final runs of a study: every objective at its chosen recipe at each of the study's budgets, once per seed, each
an ordinary `lmpt` run in a directory of its own (STUDY/runs/BUDGET/OBJECTIVE-seedS) with the downstream tasks scored
when it ends. A completed run (status.json) is not redone; any other is launched again with the same command, which
continues it from its newest checkpoint (lmpt resumes a run directory given again as hydra.run.dir)."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lmpt.downstream.codec import task_record
from lmpt.downstream.figures import (
    CHOICE_FIGURES,
    CLASSIFICATION_FIGURES,
    CONTROL_FIGURES,
    GLUE_SCORE,
    GLUE_SCORE_MEAN,
    REGRESSION_CONTROL_FIGURES,
    REGRESSION_FIGURES,
    metric_key,
    std_of,
)
from lmpt.report.runs import read_run, read_status
from lmpt.study.launch import refuse_another_run
from lmpt.study.plan import StudyPlan, at_budget
from lmpt.study.pool import Launch

TASK_FIGURES = (
    *CHOICE_FIGURES,
    *CLASSIFICATION_FIGURES,
    *CONTROL_FIGURES,
    *REGRESSION_FIGURES,
    *REGRESSION_CONTROL_FIGURES,
    GLUE_SCORE_MEAN,
    std_of(GLUE_SCORE),
    "n",
)
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
        return {
            "seed": self.seed,
            "budget": self.budget,
            "run": str(self.path),
            "status": self.status,
            "val_loss": self.val_loss,
            "step": self.step,
            "flops": self.flops,
            "epochs": self.epochs,
            "downstream": self.downstream,
            "tasks": self.tasks,
        }


def final_dir(plan: StudyPlan, budget: str, objective: str, seed: int) -> Path:
    return plan.directory / "runs" / budget / f"{objective}-seed{seed}"


def final_command(plan: StudyPlan, budget: str, objective: str, seed: int, recipe: dict[str, str]) -> list[str]:
    """The `lmpt` command of a final run: the command line's run keys (the downstream tasks among them) at
    `budget`, the objective, the seed and the chosen recipe."""
    return [
        sys.executable,
        "-m",
        "lmpt",
        *at_budget(plan.run_overrides, budget),
        f"objective={objective}",
        f"trainer.seed={seed}",
        *[f"{key}={value}" for key, value in recipe.items()],
        f"hydra.run.dir={final_dir(plan, budget, objective, seed)}",
    ]


def final_launch(plan: StudyPlan, budget: str, objective: str, seed: int, recipe: dict[str, str]) -> Launch:
    """The final run of `objective` at `budget` and `seed` as the study launches it (its directory checked: another
    study's run directory there is refused)."""
    path = final_dir(plan, budget, objective, seed)
    command = final_command(plan, budget, objective, seed, recipe)
    refuse_another_run(path, command)
    return Launch(f"final {objective} seed {seed} at {budget}", path, command, objective, budget=budget, seed=seed)


def completed(path: Path) -> bool:
    """Whether the run in `path` completed (a completed final run is not redone)."""
    return read_status(path).get("status") == "completed"


def _epochs(path: Path) -> float | None:
    """The epochs over the training text a completed run recorded in its status.json (None for a run that lacks
    them: one completed before lmpt recorded them)."""
    epochs = read_status(path).get("epochs")
    return float(epochs) if isinstance(epochs, int | float) else None


def _task_records(path: Path, tasks: list[str]) -> dict[str, dict[str, Any]]:
    """The headline figures of each of `tasks` the run recorded (RUN/downstream/TASK.json)."""
    found = {}
    for task in tasks:
        record = task_record(path, task)
        if record is not None:
            found[task] = record.headline(TASK_FIGURES)
    return found


def read_final(path: Path, objective: str, seed: int, budget: str, tasks: list[str]) -> FinalRun:
    """A final run's status, final val_loss, downstream figures and epochs, from its directory: of the downstream
    tasks, only the study's own `tasks` (a task scored by hand on the run since is none of the study's)."""
    run = read_run(path)
    status = str(read_status(path).get("status", "incomplete"))
    own = {key for task in tasks for key in run.downstream if key.startswith(metric_key(task, ""))}
    figures = {key: value for key, value in run.downstream.items() if key in own}
    return FinalRun(
        objective,
        seed,
        budget,
        path,
        status,
        run.val_loss,
        run.step,
        run.flops,
        figures,
        _task_records(path, tasks),
        _epochs(path),
    )
