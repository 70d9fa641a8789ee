"""The study's plan: what a study will do, checked before any work, and the recipes its search tries.

The plan is checked before any work: the objectives (each known, each able to score every downstream task), the
seeds, the budget and the search's share of it (enough optimizer steps, estimated as lmpt's dry-run plan estimates
them), the search space, and the run keys handed to every run. Any bad input is an LmptError (one line, exit 2)
raised before anything is written.

The search space and its trials are fixed before any trial runs: each `study.space` expression is read and checked
at planning (lmpt.study.ranges), then study.trials recipes are drawn from `study.search_seed` and written into the
study's folder (STUDY/recipes.json) before any run. Every later launch reads them back (a study begun before that
file: from its study.json), so a study resumes with the recipes it drew whatever the draw becomes. Fixed recipes make
the search independent of the order its trials finish in: a killed trial resumes as the same recipe, and every
objective tries the same ones.

What the plan would cost, printed by `lmpt-study trainer.dry_run=true`, is lmpt.study.dry_run."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra import compose
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig

from lmpt.config.budget import Budget, parse_budget
from lmpt.config.schema import DownstreamConfig
from lmpt.errors import LmptError
from lmpt.safe_files import write_atomically
from lmpt.study.ranges import draw_recipes, read_space
from lmpt.study.schema import StudyConfig

DEFAULT_SPACES = {
    "muon": {
        "optimizer.lr": "tag(log, interval(0.005, 0.2))",
        "optimizer.adamw_lr": "tag(log, interval(0.002, 0.1))",
    },
    "adamw": {"optimizer.lr": "tag(log, interval(0.0001, 0.01))"},
    "adafactor": {"optimizer.lr": "tag(log, interval(0.0001, 0.01))"},
}
"""The search space by optimizer (study.space empty): Hydra sweep expressions (lmpt.study.ranges), log-uniform."""

STUDY_SETS = ("objective", "trainer.seed", "trainer.max_steps", "trainer.resume")
"""Run keys the study sets itself for each run: the command line may not give them."""
DRY_RUN = "trainer.dry_run"
"""The study's own switch (lmpt.study.dry_run: print the plan, run nothing), never handed to its runs."""
PRESET = "preset"
"""The study's presets (conf/preset/, e.g. `+preset=gpu`): study keys, never handed to its runs."""


@dataclass(frozen=True)
class StudyPlan:
    """A checked study: what it compares, where it writes, and what each run is launched with."""

    objectives: list[str]
    seeds: list[int]
    directory: Path
    run_overrides: list[str]
    """The command line's run keys (every override but study.*), handed to every run as given."""
    budgets: list[str]
    """trainer.budget of the final runs, as given, smallest first; every objective and seed trains at each."""
    search_budget: str
    """trainer.budget of a search trial: study.search_fraction of the largest budget."""
    search_steps: dict[str, int]
    """Optimizer steps a search trial of each objective is expected to take (the dry-run plan's estimate)."""
    weights: str
    """downstream.weights of every final run (last or best): the one rule the study states."""
    space: dict[str, str]
    trials: int
    sampler: str
    search_seed: int
    recipes: list[dict[str, str]]
    """Every trial's recipe, drawn before any runs from search_seed over space: the same for every objective."""
    tasks: list[str]
    """The downstream tasks every final run scores, by record name (RUN/downstream/TASK.json): the study's own."""
    probe: bool = True
    """The dry run times CPU runs at rates measured by a probe run (study.probe); not part of the study's record."""

    @property
    def budget(self) -> str:
        """The largest budget: the search's share is taken of it, and its runs are the ones ranked."""
        return self.budgets[-1]

    def describe(self) -> dict[str, Any]:
        """The plan as study.json records it."""
        return {
            "objectives": self.objectives,
            "seeds": self.seeds,
            "budgets": self.budgets,
            "search_budget": self.search_budget,
            "search_steps": self.search_steps,
            "search_space": self.space,
            "trials_per_objective": self.trials,
            "sampler": self.sampler,
            "search_seed": self.search_seed,
            "search_recipes": self.recipes,
            "tasks": self.tasks,
            "run_overrides": self.run_overrides,
        }


def override_key(override: str) -> str:
    """The config key an override sets (`+a.b=1` -> a.b)."""
    return override.split("=", 1)[0].lstrip("+~")


def fraction_of(budget: Budget, fraction: float) -> str:
    """`fraction` of `budget` as a trainer.budget value (e.g. 2.5e+11flops)."""
    return f"{budget.amount * fraction:.6g}{budget.unit}"


def at_budget(overrides: list[str], budget: str) -> list[str]:
    """The run keys `overrides` with trainer.budget set to `budget` (last, replacing any given)."""
    return [*(o for o in overrides if override_key(o) != "trainer.budget"), f"trainer.budget={budget}"]


OLD_TASK_OVERRIDES = ("downstream.choice_tasks", "downstream.classification_tasks")
"""The run keys a study's defaults named its tasks with before downstream.tasks (the order downstream reads them)."""


NO_SCORING = ("downstream.choice_tasks=[]", "downstream.classification_tasks=[]", "downstream.score_every=0")
"""What a search trial adds to its run keys: no downstream scoring, at the end or during training (the search ranks
by the objective's own validation loss)."""


def no_scoring(overrides: list[str]) -> tuple[str, ...]:
    """NO_SCORING for a study run with the run keys `overrides`, and `downstream.tasks=[]` when they name
    downstream.tasks: a trial of a study begun before that key keeps the run keys it was launched with."""
    named = any(override_key(o) == "downstream.tasks" for o in overrides)
    return (*NO_SCORING, "downstream.tasks=[]") if named else NO_SCORING


def search_overrides(overrides: list[str], objective: str, search_budget: str) -> list[str]:
    """The run keys of a search trial of `objective`: the command line's, at the search's budget."""
    return [*at_budget(overrides, search_budget), f"objective={objective}"]


def run_keys(study: StudyConfig, overrides: list[str]) -> list[str]:
    """The run keys every run of the study is launched with: study.run_keys (the default scale) but those the
    command line sets, then the command line's own (every override but study.*)."""
    own = (DRY_RUN, PRESET)
    given = [o for o in overrides if not override_key(o).startswith("study.") and override_key(o) not in own]
    keys = {_key_group(override_key(o)) for o in given}
    return [str(k) for k in study.run_keys if _key_group(override_key(str(k))) not in keys] + given


def _key_group(key: str) -> str:
    """The key an override replaces in study.run_keys: downstream.tasks and its old keys are one list of tasks, so
    the command line's tasks, in either form, replace the defaults' (lmpt-study downstream.choice_tasks=[X] scores X,
    not X and the default tasks)."""
    return "downstream.tasks" if key in OLD_TASK_OVERRIDES else key


def _check_study_keys(study: StudyConfig) -> None:
    from lmpt.objectives.registry import objective_class

    objectives = [str(o) for o in study.objectives]
    if not objectives:
        raise LmptError("study.objectives is empty: name the objectives to compare, e.g. study.objectives=[clm,mlm]")
    for name in objectives:
        if objective_class(name) is None:
            known = ", ".join(sorted(_known_objectives()))
            raise LmptError(f"study.objectives: unknown objective '{name}': use some of {known}")
    if len(set(objectives)) < len(objectives):
        raise LmptError("study.objectives names an objective twice: name each once")
    if not study.seeds:
        raise LmptError("study.seeds is empty: give at least one pre-training seed, e.g. study.seeds=[0]")
    if len(set(study.seeds)) < len(study.seeds):
        raise LmptError("study.seeds names a seed twice: give distinct seeds")
    if study.trials < 1:
        raise LmptError(f"study.trials={study.trials} must be at least 1")
    if not 0 < study.search_fraction <= 1:
        raise LmptError(f"study.search_fraction={study.search_fraction} must be in (0, 1]")
    if study.sampler == "tpe":
        raise LmptError(
            "study.sampler=tpe draws each trial from the trials finished before it, so a resumed or "
            "parallel search, and each objective, would try other recipes: use study.sampler=random "
            "(every trial's recipe drawn before any runs)"
        )
    if study.sampler != "random":
        raise LmptError(f"study.sampler={study.sampler} must be random")


def _known_objectives() -> list[str]:
    from lmpt.objectives.registry import discover_objectives

    return list(discover_objectives())


def _check_overrides(overrides: list[str], space: dict[str, str]) -> None:
    for override in overrides:
        key = override_key(override)
        if key in STUDY_SETS:
            raise LmptError(
                f"{key} is set by the study for each run: drop {override} (study.objectives and "
                "study.seeds say which runs it trains)"
            )
        if key in space:
            raise LmptError(f"{key} is searched by the study (study.space): drop {override}")
        if key.startswith("hydra"):
            raise LmptError(f"{override}: the study launches its runs itself; drop the hydra setting")


def final_budgets(study: StudyConfig, run: DictConfig, overrides: list[str]) -> list[tuple[str, Budget]]:
    """The final runs' budgets, smallest first, as given and parsed: study.budgets, or trainer.budget alone when the
    command line gives it (it replaces study.budgets) or study.budgets is empty. One unit for all: they are compared."""
    given_budget = any(override_key(o) == "trainer.budget" for o in overrides)
    if given_budget and any(override_key(o) == "study.budgets" for o in overrides):
        raise LmptError("give trainer.budget (one budget) or study.budgets (several), not both")
    values = [str(b) for b in study.budgets]
    if given_budget or not values:
        if run.trainer.budget is None:
            raise LmptError(
                "lmpt-study compares objectives at equal compute: give trainer.budget (e.g. 1e12flops) or study.budgets"
            )
        values = [str(run.trainer.budget)]
    elif run.trainer.budget is not None and any(override_key(str(k)) == "trainer.budget" for k in study.run_keys):
        raise LmptError("study.run_keys sets trainer.budget and study.budgets is given: drop one of them")
    parsed = []
    for value in values:
        try:
            budget = parse_budget(value)
        except LmptError as exc:
            raise LmptError(f"study.budgets: {exc}" if not given_budget else str(exc)) from None
        if budget is None:
            raise LmptError(f"study.budgets: {value} is no budget: give e.g. 1e12flops")
        parsed.append((value, budget))
    if any(b.unit == "minutes" for _, b in parsed):
        raise LmptError(
            f"lmpt-study compares objectives at equal compute, and a budget in minutes "
            f"({', '.join(values)}) buys each objective what its speed on this machine allows: give FLOPs "
            "(e.g. 1e12flops) or tokens"
        )
    if len({b.unit for _, b in parsed}) > 1:
        raise LmptError(f"study.budgets mixes units ({', '.join(values)}): give every budget in one unit")
    if len({b.amount for _, b in parsed}) < len(parsed):
        raise LmptError(f"study.budgets names a budget twice ({', '.join(values)}): give distinct budgets")
    return sorted(parsed, key=lambda p: p[1].amount)


def planned_steps(cfg: DictConfig, given: set[str]) -> int:
    """The optimizer steps the run `cfg` composes is expected to take, as `lmpt trainer.dry_run=true` plans them
    (the model built on the meta device, its step cost against the budget). Checks the config as lmpt does."""
    import torch

    from lmpt.train.plan import sized_run  # the dry-run plan's own sizing
    from lmpt.train.spec import resolve

    _, _, length, *_ = sized_run(resolve(cfg, given), torch.device("cpu"), torch.float32)
    return length.max_steps


def _check_objective(
    name: str, overrides: list[str], search_budget: str, min_steps: int, recipes: list[dict[str, str]]
) -> int:
    """Compose the search trials of objective `name` (each recipe: a searched key must exist and take its values),
    check the first and its downstream tasks as lmpt would; returns the steps a trial is expected to take."""
    from lmpt.downstream.run_tasks import check_downstream
    from lmpt.objectives.registry import objective_class

    run = search_overrides(overrides, name, search_budget)
    for recipe in recipes[1:]:
        compose(config_name="config", overrides=[*run, *(f"{k}={v}" for k, v in recipe.items())])
    run += [f"{k}={v}" for k, v in recipes[0].items()]
    cfg = compose(config_name="config", overrides=run)
    try:
        objective = objective_class(name)
        assert objective is not None, "the study's objectives were checked by name"
        check_downstream(cfg.downstream, objective, cfg.data.seq_len, cfg.model.max_seq_len)
    except LmptError as exc:
        raise LmptError(f"study.objectives: {name} cannot score the study's downstream tasks: {exc}") from None
    steps = planned_steps(cfg, {override_key(o) for o in run})
    if steps < min_steps:
        raise LmptError(
            f"the search budget trainer.budget={search_budget} (study.search_fraction of the budget) buys {name} "
            f"about {steps} optimizer step(s), fewer than study.min_search_steps={min_steps}: raise trainer.budget "
            "or study.search_fraction"
        )
    return steps


def search_space(study: StudyConfig, optimizer: str) -> dict[str, str]:
    """study.space (key -> expression), or the optimizer's default space when it is empty; each expression checked
    (lmpt.study.ranges)."""
    given = study.space if study.space is not None else {}
    if not isinstance(given, Mapping) or not all(isinstance(v, str | int | float) for v in given.values()):
        raise LmptError(
            f"study.space={given} must map each searched key to a range, e.g. "
            "study.space={optimizer.lr:'tag(log, interval(0.001, 0.1))'}"
        )
    space = {str(k): str(v) for k, v in given.items()} or DEFAULT_SPACES.get(optimizer, {})
    for key in space:
        if key in (*STUDY_SETS, "trainer.budget", DRY_RUN) or key.startswith(("study.", "hydra", PRESET)):
            raise LmptError(
                f"study.space searches {key}, which the study sets itself for each run (its objectives, seeds, "
                "budgets and launch): search training keys such as optimizer.lr, and compare objectives or seeds "
                "with study.objectives and study.seeds"
            )
    if not space:
        raise LmptError(f"optimizer={optimizer} has no default search space: give study.space")
    try:
        read_space(space)
    except ValueError as exc:
        raise LmptError(str(exc)) from None
    return space


def _check_range_ends(run: DictConfig, run_overrides: list[str], space: dict[str, str]) -> None:
    """Each searched key at each end of its range (every choice of a choice) composed into the runs' config and
    checked as lmpt checks a run, so a range reaching values lmpt refuses (a learning rate at or below 0) is refused
    before any trial starts instead of failing trials. A check the runs' keys already fail (`run`, composed from
    `run_overrides`) is left to the checks that name them."""
    from lmpt.config.validate import validate_config

    try:
        validate_config(run)
    except LmptError:
        return
    for key, r in read_space(space).items():
        for value in r.choices or (r.low, r.high):
            try:
                validate_config(compose(config_name="config", overrides=[*run_overrides, f"{key}={value}"]))
            except LmptError as exc:
                raise LmptError(
                    f"study.space: {key}={space[key]} reaches values lmpt refuses ({exc}): give a range inside "
                    "what the key takes"
                ) from None


def task_names(downstream: DownstreamConfig) -> list[str]:
    """The record names (RUN/downstream/TASK.json) of the tasks a run with this `downstream` section scores."""
    from lmpt.downstream.run_tasks import task_entries

    return [entry.name() for entry in task_entries(downstream)]


STUDY_JSON = "study.json"
"""STUDY/study.json: the study's record (lmpt.study.record), its plan first."""
RECIPES_JSON = "recipes.json"
"""STUDY/recipes.json: the search's space, trials, seed and every trial's recipe, written before the study's first run
and read back by every later launch."""
SEARCH_KEYS = ("search_space", "trials_per_objective", "search_seed")
"""The plan's keys (StudyPlan.describe) the recipes were drawn from."""


def _recipes_of(record: object, space: dict[str, str], trials: int, seed: int) -> list[dict[str, str]] | None:
    """The recipes `record` (recipes.json, or study.json's plan) holds for this search, None when it holds another
    search's or none that reads as `trials` recipes of the space's keys."""
    if not isinstance(record, dict) or [record.get(k) for k in SEARCH_KEYS] != [space, trials, seed]:
        return None
    recipes = record.get("search_recipes")
    if not isinstance(recipes, list) or len(recipes) != trials:
        return None
    if not all(
        isinstance(r, dict) and list(r) == list(space) and all(isinstance(v, str) for v in r.values()) for r in recipes
    ):
        return None
    return [dict(r) for r in recipes]


def recorded_recipes(directory: Path, space: dict[str, str], trials: int, seed: int) -> list[dict[str, str]] | None:
    """The recipes the study in `directory` drew for this search when it began: its recipes.json, else (a study begun
    before that file) the plan its study.json records; None for a new study, or a folder holding another search
    (which `refuse_another_study` then refuses)."""
    for name in (RECIPES_JSON, STUDY_JSON):
        try:
            record = json.loads((directory / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        found = _recipes_of(record if name == RECIPES_JSON else record.get("plan"), space, trials, seed)
        if found is not None:
            return found
    return None


def in_tasks_form(overrides: list[str]) -> list[str]:
    """`overrides` with the old task keys' lists written as one downstream.tasks list, where the first task key was:
    the same tasks in the same order (lmpt.downstream.run_tasks.task_entries), so the same runs."""
    tasks = [o for o in overrides if override_key(o) == "downstream.tasks"]
    tasks += [o for old in OLD_TASK_OVERRIDES for o in overrides if override_key(o) == old]
    if not any(override_key(o) in OLD_TASK_OVERRIDES for o in tasks):
        return overrides
    parsed = [OverridesParser.create().parse_override(o).value() for o in tasks]
    entries = [e for value in parsed if isinstance(value, list) for e in value]
    first = next(i for i, o in enumerate(overrides) if o in tasks)
    rest = [o for o in overrides if o not in tasks]
    return [*rest[:first], f"downstream.tasks=[{','.join(map(str, entries))}]", *rest[first:]]


def recorded_run_keys(directory: Path, run_overrides: list[str]) -> list[str]:
    """The run keys the study in `directory` was launched with, where they name the same tasks as `run_overrides` in
    the old keys (a study begun before its defaults named downstream.tasks resumes its runs as launched, without a
    note on every launch about keys the user never typed); otherwise `run_overrides`."""
    try:
        recorded = json.loads((directory / STUDY_JSON).read_text(encoding="utf-8"))["plan"]["run_overrides"]
    except (OSError, ValueError, KeyError, TypeError):
        return run_overrides
    if not isinstance(recorded, list) or recorded == run_overrides:
        return run_overrides
    recorded = [str(o) for o in recorded]
    return recorded if in_tasks_form(recorded) == in_tasks_form(run_overrides) else run_overrides


def record_recipes(plan: StudyPlan) -> None:
    """STUDY/recipes.json, whole or absent, unless the study wrote it before: the search's recipes as the plan drew
    (or read) them, before any run."""
    path = plan.directory / RECIPES_JSON
    if path.exists():
        return
    search = {k: v for k, v in plan.describe().items() if k in (*SEARCH_KEYS, "search_recipes")}
    text = json.dumps(search, indent=2) + "\n"
    write_atomically(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def plan_study(cfg: DictConfig, overrides: list[str]) -> StudyPlan:
    """Check the study the composed `cfg` and the command line's `overrides` describe; LmptError on bad input."""
    from lmpt.config.validate import refuse_loose_booleans

    study = cfg.study
    refuse_loose_booleans(cfg)  # study.probe=2 is no yes or no, as trainer.amp=2 is not
    _check_study_keys(study)
    directory = Path(study.dir).expanduser().resolve()
    blocking = next((p for p in (directory, *directory.parents) if p.exists()), None)
    if blocking is not None and not blocking.is_dir():
        raise LmptError(f"study.dir={study.dir}: {blocking} is a file, not a folder: give a folder for the study")
    run_overrides = recorded_run_keys(directory, run_keys(study, overrides))
    run = compose(config_name="config", overrides=run_overrides)  # what every run composes, but its objective
    space = search_space(study, str(run.optimizer.name))
    _check_overrides(run_overrides, space)
    _check_range_ends(run, run_overrides, space)
    budgets = final_budgets(study, run, overrides)
    search_budget = fraction_of(budgets[-1][1], study.search_fraction)
    objectives = [str(o) for o in study.objectives]
    trials, seed = int(study.trials), int(study.search_seed)
    space = {str(k): str(v) for k, v in space.items()}
    recipes = recorded_recipes(directory, space, trials, seed) or draw_recipes(read_space(space), trials, seed)
    steps = {
        name: _check_objective(name, run_overrides, search_budget, study.min_search_steps, recipes)
        for name in objectives
    }
    return StudyPlan(
        objectives=objectives,
        seeds=[int(s) for s in study.seeds],
        directory=directory,
        run_overrides=run_overrides,
        budgets=[given for given, _ in budgets],
        search_budget=search_budget,
        search_steps=steps,
        weights=str(run.downstream.weights),
        space=space,
        trials=trials,
        sampler=str(study.sampler),
        search_seed=seed,
        recipes=recipes,
        tasks=task_names(run.downstream),
        probe=bool(study.probe),
    )
