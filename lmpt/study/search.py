"""The learning-rate search of one objective: an `lmpt -m hydra/sweeper=optuna` sweep (hydra-optuna-sweeper) of
study.trials trials at the search's share of the budget, each trial an ordinary run directory minimising its own
final validation loss. A killed search resumes: the trials that finished (completed, or failed on their own: a
diverged learning rate) are kept, and a new launch of the sweep runs only the missing ones, its sampler seeded
past the trials already drawn. The chosen recipe is the completed trial with the lowest val_loss."""

from __future__ import annotations

import math
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from lmpt.console import console
from lmpt.errors import LmptError
from lmpt.report.runs import read_run, read_status
from lmpt.study.plan import StudyPlan, override_key, search_overrides

FINISHED = ("completed", "failed")
"""Trial endings that count: a failed trial (a non-finite loss at a learning rate too high) is a result too."""
LAUNCH_PREFIX = "launch-"


@dataclass
class Trial:
    """One search trial, as its run directory records it."""

    path: Path
    recipe: dict[str, str]
    """The searched keys and the values the sampler drew (as the trial's overrides give them)."""
    status: str
    val_loss: float | None
    steps: int | None

    def describe(self) -> dict[str, Any]:
        return {"run": str(self.path), "recipe": self.recipe, "status": self.status, "val_loss": self.val_loss,
                "steps": self.steps}  # fmt: skip


@dataclass
class Search:
    """An objective's search: its trials (every launch's, in order) and the recipe it chose."""

    objective: str
    trials: list[Trial] = field(default_factory=list)

    @property
    def finished(self) -> list[Trial]:
        return [t for t in self.trials if t.status in FINISHED]

    def chosen(self) -> Trial | None:
        """The completed trial with the lowest finite val_loss (the first of equals), or None."""
        scored = [t for t in self.finished if t.val_loss is not None and math.isfinite(t.val_loss)]
        return min(scored, key=lambda t: t.val_loss) if scored else None

    def describe(self) -> dict[str, Any]:
        best = self.chosen()
        return {
            "trials": [t.describe() for t in self.trials],
            "chosen_recipe": best.recipe if best else None,
            "chosen_val_loss": best.val_loss if best else None,
            "chosen_trial": str(best.path) if best else None,
        }


def search_dir(plan: StudyPlan, objective: str) -> Path:
    return plan.directory / "search" / objective


def read_search(plan: StudyPlan, objective: str) -> Search:
    """Every trial under the objective's search directory, launch by launch, job by job."""
    search = Search(objective)
    root = search_dir(plan, objective)
    launches = sorted(root.glob(f"{LAUNCH_PREFIX}*"), key=lambda p: int(p.name[len(LAUNCH_PREFIX) :]))
    for launch in launches:
        jobs = sorted((p for p in launch.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
        for job in jobs:
            search.trials.append(_read_trial(job, plan.space))
    return search


def _read_trial(job: Path, space: dict[str, str]) -> Trial:
    overrides_file = job / ".hydra" / "overrides.yaml"
    overrides = [str(o) for o in OmegaConf.load(overrides_file)] if overrides_file.exists() else []
    recipe = {override_key(o): o.split("=", 1)[1] for o in overrides if override_key(o) in space}
    run = read_run(job)
    status = str(read_status(job).get("status", "incomplete"))
    val_loss = run.val_loss if status == "completed" else None
    return Trial(job, recipe, status, val_loss, run.step)


def sweep_command(plan: StudyPlan, objective: str, launch: Path, trials: int, sampler_seed: int) -> list[str]:
    """The `lmpt -m` command of one launch of the search: optuna over the search space, `trials` trials, no
    downstream scoring, neither at the end nor during training (the search ranks by the objective's own validation
    loss)."""
    return [
        sys.executable, "-m", "lmpt", "-m",
        *search_overrides(plan.run_overrides, objective, plan.search_budget),
        f"trainer.seed={plan.seeds[0]}",
        "downstream.choice_tasks=[]", "downstream.classification_tasks=[]", "downstream.score_every=0",
        "hydra/sweeper=optuna", f"hydra/sweeper/sampler={plan.sampler}",
        f"hydra.sweeper.sampler.seed={sampler_seed}", f"hydra.sweeper.n_trials={trials}",
        "hydra.sweeper.direction=minimize",
        *[f"{key}={expression}" for key, expression in plan.space.items()],
        f"hydra.sweep.dir={launch}",
    ]  # fmt: skip


def run_search(plan: StudyPlan, objective: str) -> Search:
    """Run the trials the objective's search still lacks (none when it is done); returns the whole search."""
    search = read_search(plan, objective)
    missing = plan.trials - len(search.finished)
    if missing <= 0:
        console.print(f"search {objective}: {len(search.finished)} trials done, reused")
        return search
    root = search_dir(plan, objective)
    launch = root / f"{LAUNCH_PREFIX}{len(list(root.glob(f'{LAUNCH_PREFIX}*')))}"
    # the sampler seeded past the trials already drawn: a resumed random search does not redraw them
    seed = plan.search_seed + len(search.trials)
    console.print(f"search {objective}: {missing} trial(s) at trainer.budget={plan.search_budget} into {launch}")
    result = subprocess.run(sweep_command(plan, objective, launch, missing, seed))
    if result.returncode in (130, -2):  # Ctrl-C: stop the study; the same command resumes it
        raise KeyboardInterrupt(f"search {objective} interrupted")
    search = read_search(plan, objective)
    if len(search.finished) < plan.trials:  # every objective gets the same number of trials
        raise LmptError(f"search {objective}: {len(search.finished)} of {plan.trials} trials finished (the sweep "
                        f"exited with {result.returncode}; see {launch}): run the same command to resume")  # fmt: skip
    if search.chosen() is None:
        raise LmptError(f"search {objective}: no trial completed with a finite val_loss (see {root}): "
                        "widen study.space or raise the budget")  # fmt: skip
    return search
