"""The learning-rate search of one objective: study.trials trials at the search's share of the budget, their recipes
fixed before any runs (lmpt.study.space: the same recipes for every objective), each trial an ordinary `lmpt` run
directory (STUDY/search/OBJECTIVE/trial-K) minimising its own final validation loss. A killed search resumes trial by
trial: a finished trial (completed, or failed on its own: a diverged learning rate) is kept, any other is launched
again with the same command, which continues it from its newest checkpoint. The chosen recipe is the completed trial
with the lowest val_loss (the first of equals)."""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lmpt.errors import LmptError
from lmpt.report.ranking import BITS_PER_TOKEN, is_bound
from lmpt.report.runs import RunSummary, read_run, read_status
from lmpt.study.launch import refuse_another_run
from lmpt.study.plan import NO_SCORING, StudyPlan, search_overrides
from lmpt.study.pool import Launch

FINISHED = ("completed", "failed")
"""Trial endings that count: a failed trial (a non-finite loss at a learning rate too high) is a result too."""
TRIAL_PREFIX = "trial-"
SWEEP_LAUNCHES = "launch-*"
"""search/OBJECTIVE/launch-K: the layout of a study whose searches ran as optuna sweeps (an earlier lmpt-study)."""


@dataclass
class Trial:
    """One search trial, as its run directory records it."""

    path: Path
    recipe: dict[str, str]
    """The searched keys and the values drawn for this trial."""
    status: str
    val_loss: float | None
    steps: int | None

    def describe(self) -> dict[str, Any]:
        return {
            "run": str(self.path),
            "recipe": self.recipe,
            "status": self.status,
            "val_loss": self.val_loss,
            "steps": self.steps,
        }


@dataclass
class Search:
    """An objective's search: its trials, in the order drawn, and the recipe it chose."""

    objective: str
    trials: list[Trial] = field(default_factory=list)

    @property
    def finished(self) -> list[Trial]:
        return [t for t in self.trials if t.status in FINISHED]

    def chosen(self) -> Trial | None:
        """The completed trial with the lowest finite val_loss (the first of equals), or None."""
        scored = [t for t in self.finished if t.val_loss is not None and math.isfinite(t.val_loss)]
        return min(scored, key=lambda t: float(t.val_loss or 0.0)) if scored else None  # all scored: none is None

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


def trial_dir(plan: StudyPlan, objective: str, index: int) -> Path:
    return search_dir(plan, objective) / f"{TRIAL_PREFIX}{index}"


def refuse_sweep_layout(plan: StudyPlan) -> None:
    """A study directory whose searches ran as optuna sweeps (search/OBJECTIVE/launch-K, an earlier lmpt-study) is
    refused in one line: its trials were drawn one launch at a time and cannot resume as fixed recipes."""
    found = sorted((plan.directory / "search").glob(f"*/{SWEEP_LAUNCHES}"))
    if found:
        raise LmptError(
            f"{plan.directory} holds a study made by an earlier lmpt-study, whose searches ran as optuna sweeps "
            f"({found[0].relative_to(plan.directory)}): pick another study.dir or move it away (lmpt-compare still "
            "reads its runs)"
        )


def read_trial(path: Path, recipe: dict[str, str]) -> Trial:
    """The trial of `recipe` as its run directory `path` records it (incomplete when it has no status)."""
    status = str(read_status(path).get("status", "incomplete"))
    run = read_run(path)
    return Trial(path, recipe, status, trial_loss(run) if status == "completed" else None, run.step)


def trial_loss(run: RunSummary) -> float | None:
    """The loss a trial is ranked by: its final val_loss, or for a bound (mdlm) the same bound over the yardstick's
    fixed passes of masks (val_bits_per_token in nats), where val_loss is one pass's noisy draw."""
    bits = run.measures.get(BITS_PER_TOKEN)
    if is_bound(run.objective) and bits is not None:
        return bits * math.log(2)
    return run.val_loss


def read_search(plan: StudyPlan, objective: str) -> Search:
    """Every trial of the objective's search as its directory records it now."""
    trials = [read_trial(trial_dir(plan, objective, k), recipe) for k, recipe in enumerate(plan.recipes)]
    return Search(objective, trials)


def trial_command(plan: StudyPlan, objective: str, index: int) -> list[str]:
    """The `lmpt` command of a trial: the command line's run keys at the search's budget, the first seed, the trial's
    recipe, no downstream scoring, neither at the end nor during training (the search ranks by the objective's own
    validation loss)."""
    return [
        sys.executable,
        "-m",
        "lmpt",
        *search_overrides(plan.run_overrides, objective, plan.search_budget),
        f"trainer.seed={plan.seeds[0]}",
        *NO_SCORING,
        *[f"{key}={value}" for key, value in plan.recipes[index].items()],
        f"hydra.run.dir={trial_dir(plan, objective, index)}",
    ]


def trial_launch(plan: StudyPlan, objective: str, index: int) -> Launch:
    """Trial `index` of the objective's search as the study launches it (its directory checked: another study's run
    directory there is refused)."""
    path, command = trial_dir(plan, objective, index), trial_command(plan, objective, index)
    refuse_another_run(path, command)
    return Launch(f"search {objective} trial {index + 1}/{plan.trials}", path, command, objective, trial=index)


def unfinished_trials(plan: StudyPlan, search: Search) -> list[Launch]:
    """The trials of `search` still to run (every trial's directory checked first); none when all finished."""
    launches = [trial_launch(plan, search.objective, k) for k in range(plan.trials)]
    return [launch for launch, trial in zip(launches, search.trials, strict=True) if trial.status not in FINISHED]


def check_trial(plan: StudyPlan, launch: Launch, code: int | None) -> Trial:
    """The trial `launch` trained, as its directory records it; LmptError when it did not finish (every objective
    gets the same trials, so the search cannot choose without it)."""
    assert launch.trial is not None
    trial = read_trial(launch.path, plan.recipes[launch.trial])
    if trial.status not in FINISHED:
        ended = f"lmpt exited with {code}" if code is not None else f"its run is {trial.status}"
        raise LmptError(
            f"search {launch.objective}: trial {launch.trial} did not finish ({ended}; see "
            f"{launch.path}): run the same command to resume it"
        )
    return trial


def check_search(plan: StudyPlan, search: Search) -> Search:
    """`search` once every trial finished; LmptError when none completed with a finite val_loss."""
    if search.chosen() is None:
        raise LmptError(
            f"search {search.objective}: no trial completed with a finite val_loss (see "
            f"{search_dir(plan, search.objective)}): widen study.space or raise the budget"
        )
    return search
