"""The study's runs room: each objective's learning-rate search, its final runs, and the order they train in.

The learning-rate search of one objective: study.trials trials at the search's share of the budget, their recipes
fixed before any runs (lmpt.study.plan: the same recipes for every objective), each trial an ordinary `lmpt` run
directory (STUDY/search/OBJECTIVE/trial-K) minimising its own final validation loss. A killed search resumes trial by
trial: a finished trial (completed, or failed on its own: a diverged learning rate) is kept, any other is launched
again with the same command, which continues it from its newest checkpoint. The chosen recipe is the completed trial
with the lowest val_loss (the first of equals).

The final runs of a study: every objective at its chosen recipe at each of the study's budgets, once per seed, each
an ordinary `lmpt` run in a directory of its own (STUDY/runs/BUDGET/OBJECTIVE-seedS) with the downstream tasks scored
when it ends. A completed run (status.json) is not redone; any other is launched again with the same command, which
continues it from its newest checkpoint (lmpt resumes a run directory given again as hydra.run.dir).

The order a study trains its runs in, over its slots (lmpt.study.pool's): every search trial first (each objective's
in turn), then each objective's finals as soon as its search has chosen, the smallest budget first, every objective
at it before the next. One slot trains them one after another in that order; several train them side by side. What a
run trains never depends on the order runs end in (every trial's recipe is drawn before any runs), and the records
are read back from the run directories in the plan's order, so the study's record is the same in any order of
completion. Runs that finished (trials completed or failed on their own, finals completed) are found by their records
and not run again."""

from __future__ import annotations

import heapq
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lmpt.console import console
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
from lmpt.downstream.records import task_record
from lmpt.errors import LmptError
from lmpt.report.ranking import BITS_PER_TOKEN, is_bound
from lmpt.report.runs import RunSummary, read_run, read_status
from lmpt.stopping import stopped_by
from lmpt.study.plan import StudyPlan, at_budget, no_scoring, search_overrides
from lmpt.study.pool import Launch, LocalPool, SlurmPool, refuse_another_run

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
        *no_scoring(plan.run_overrides),
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


Record = Callable[[dict[str, Search], dict[str, list[FinalRun]]], object]
"""Writes the study's record (lmpt.study.record.write_study, bound to the plan)."""


@dataclass
class StudyRuns:
    """The study's runs in flight and still to train, and what the finished ones recorded."""

    plan: StudyPlan
    pool: LocalPool | SlurmPool
    record: Record
    searches: dict[str, Search] = field(default_factory=dict)
    """Each objective's search, once every trial finished and it chose a recipe."""
    _queue: list[tuple[tuple[int, ...], int, Launch]] = field(default_factory=list)
    _left: dict[str, set[int]] = field(default_factory=dict)
    """Each objective's trials still running or queued."""
    _finals: set[str] = field(default_factory=set)
    """The final runs the study launched or found completed (their directories): the ones its record reads."""
    _failure: LmptError | None = None

    def run(self) -> None:
        """Train every run the study still lacks. A run that cannot finish (a trial that did not, a search without a
        completed trial) stops new runs from starting; those in flight end first, then it is raised. A stop signal
        is passed on to the runs in flight (lmpt.study.pool), then raised."""
        try:
            for name in self.plan.objectives:
                self._queue_search(name)
            while self._queue or self.pool.running:
                while self._queue and self.pool.free and self._failure is None:
                    self._start(heapq.heappop(self._queue)[2])
                if not self.pool.running:
                    break
                for launch, code in self.pool.wait():
                    self._ended(launch, code)
        except BaseException:
            if stopped_by() is not None:  # whatever exception the stop became on the way out (lmpt.stopping)
                self.pool.stop()
            raise
        if self._failure is not None:
            raise self._failure

    def finals(self) -> dict[str, list[FinalRun]]:
        """The final runs the study launched or reused, as their directories record them, in the plan's order."""
        found: dict[str, list[FinalRun]] = {}
        for budget in self.plan.budgets:
            for name in self.plan.objectives:
                for seed in self.plan.seeds:
                    launch = self._final(name, budget, seed) if name in self.searches else None
                    if launch is not None and str(launch.path) in self._finals:
                        found.setdefault(name, []).append(read_final(launch.path, name, seed, budget, self.plan.tasks))
        return {name: found[name] for name in self.plan.objectives if name in found}

    def write(self) -> None:
        """The study's record as it stands: the searches and finals, in the plan's order. A launch that collected
        neither (one stopped or refused before its first search was done) leaves the record on disk as it was."""
        searches = {name: self.searches[name] for name in self.plan.objectives if name in self.searches}
        finals = self.finals()
        if searches or finals:
            self.record(searches, finals)

    def _push(self, order: tuple[int, ...], launch: Launch) -> None:
        heapq.heappush(self._queue, (order, len(self._queue), launch))

    def _queue_search(self, name: str) -> None:
        search = read_search(self.plan, name)
        todo = unfinished_trials(self.plan, search)
        if not todo:
            console.print(f"search {name}: {self.plan.trials} trials done, reused")
            self._chose(check_search(self.plan, search))
            return
        self._left[name] = {launch.trial for launch in todo if launch.trial is not None}
        for launch in todo:
            self._push((0, self.plan.objectives.index(name), launch.trial or 0), launch)

    def _final(self, name: str, budget: str, seed: int) -> Launch:
        return final_launch(self.plan, budget, name, seed, self.searches[name].chosen().recipe)  # type: ignore[union-attr]

    def _chose(self, search: Search) -> None:
        """The objective's search is done: its record written, its finals queued (a completed one is reused)."""
        name = search.objective
        self.searches[name] = search
        self.write()
        for b, budget in enumerate(self.plan.budgets):
            for s, seed in enumerate(self.plan.seeds):
                launch = self._final(name, budget, seed)
                if completed(launch.path):
                    self._finals.add(str(launch.path))
                    console.print(f"{launch.name}: completed, reused")
                else:
                    self._push((1, b, self.plan.objectives.index(name), s), launch)

    def _start(self, launch: Launch) -> None:
        try:
            slot = self.pool.start(launch)
        except LmptError as exc:
            self._failure = self._failure or exc
            return
        if launch.trial is not None:
            recipe, budget = self.plan.recipes[launch.trial], f" at trainer.budget={self.plan.search_budget}"
        else:
            recipe, budget = self.searches[launch.objective].chosen().recipe, ""  # type: ignore[union-attr]
            self._finals.add(str(launch.path))
        keys = " ".join(f"{key}={value}" for key, value in recipe.items())
        where = f" on {slot}" if self.pool.side_by_side else ""
        console.print(f"{launch.name}{budget}: {keys} into {launch.path}{where}")

    def _ended(self, launch: Launch, code: int | None) -> None:
        if self.pool.side_by_side:
            console.print(f"{launch.name}: ended ({read_status(launch.path).get('status', 'no status')})")
        if launch.trial is None:
            return
        try:
            check_trial(self.plan, launch, code)
            left = self._left[launch.objective]
            left.discard(launch.trial)
            if not left:
                self._chose(check_search(self.plan, read_search(self.plan, launch.objective)))
        except LmptError as exc:
            self._failure = self._failure or exc
