"""Zero-shot scores during training (`downstream.score_every`), so that a run shows curves, not only end points:
every `score_every` steps (and at the last) each choice task is scored on its fast subset by the function that
scores it when training ends (lmpt.downstream.kinds.zero_shot.evaluate_zero_shot), on the live model, and the figures
are logged as `curve/TASK/FIGURE` with their 95% interval. The fine-tuned classification tasks are not scored during
training: a fine-tuning per point costs more than the training between points.

A task's fast subset: its bundled twin `bundled:NAME-fast` when lmpt ships one (bundled:blimp -> bundled:blimp-fast),
else the task itself; then at most `downstream.curve_items` of its items, drawn once with a fixed seed, in task
order: the same items at every step, in every run. The training layer takes the scorer as a callable (lmpt.cli
hands it to run_training) and calls it with the random streams, gradients and train mode set aside
(lmpt.train.evaluation), so scoring changes no training number."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from omegaconf import DictConfig

from lmpt.config.schema import DownstreamConfig
from lmpt.downstream.figures import ACCURACY, curve_key
from lmpt.downstream.kinds.zero_shot import ZeroShotTask, evaluate_zero_shot, logged_zero_shot, read_zero_shot
from lmpt.downstream.significance import high_key, low_key
from lmpt.downstream.tasks.choice_tasks import BUNDLED_PREFIX, resolve_task, task_name
from lmpt.errors import LmptError
from lmpt.rundir.trained import Trained

if TYPE_CHECKING:
    from lmpt.model.language_model import LanguageModel
    from lmpt.objectives.base import Objective

FAST_SUFFIX = "-fast"
SUBSET_SEED = 0
"""Seed of the draw of a fast subset's items (numpy's generator): fixed, so every run scores the same items."""
LIVE_WEIGHTS = Path("(the model in training)")
"""What a live model's `Trained.weights` names (a path only in messages)."""


def fast_twin(task: str) -> str:
    """`bundled:NAME-fast` when lmpt ships it beside `bundled:NAME`, else `task` itself."""
    if not task.startswith(BUNDLED_PREFIX) or task.removesuffix(".jsonl").endswith(FAST_SUFFIX):
        return task
    twin = task.removesuffix(".jsonl") + FAST_SUFFIX
    try:
        resolve_task(twin)
    except LmptError:
        return task
    return twin


def fast_subset(task: ZeroShotTask, limit: int) -> ZeroShotTask:
    """At most `limit` of the task's items, drawn with SUBSET_SEED, kept in task order."""
    items = task.items
    if len(items) <= limit:
        return task
    kept = np.sort(np.random.default_rng(SUBSET_SEED).choice(len(items), size=limit, replace=False))
    return task.with_items([items[i] for i in kept])


def curve_figures(result: dict) -> dict[str, float]:
    """What a curve point logs of a zero-shot result: the figures logged after training, accuracy's interval and n."""
    figures = dict(logged_zero_shot(result))
    for key in (low_key(ACCURACY), high_key(ACCURACY), "n"):
        if result.get(key) is not None:
            figures[key] = result[key]
    return figures


@dataclass(frozen=True)
class TaskCurves:
    """The zero-shot tasks' fast subsets, read once, and how to score them on a live model (`__call__`)."""

    every: int
    """downstream.score_every: steps between curve points."""
    tasks: tuple[tuple[str, ZeroShotTask], ...]
    """(name in curve/NAME/..., its fast subset)."""
    batch_size: int
    config: DictConfig
    """The run's config, as a Trained model carries it."""

    def __call__(self, model: LanguageModel, objective: Objective) -> dict[str, float]:
        """`curve/TASK/FIGURE` of every task on `model` (a LanguageModel in eval mode) trained by `objective`."""
        trained = Trained(model, objective.tokenizer, self.config, objective.arch, objective.name, LIVE_WEIGHTS)
        figures: dict[str, float] = {}
        for name, task in self.tasks:
            result = evaluate_zero_shot(trained, task, self.batch_size, hidden=True)
            figures |= {curve_key(name, k): v for k, v in curve_figures(result).items()}
        return figures


def curve_scorer(downstream: DownstreamConfig, config: DictConfig) -> TaskCurves | None:
    """The scorer of `downstream`'s choice tasks every downstream.score_every steps, or None when it is 0; each fast
    subset is read now, before training (two tasks with one twin are scored once)."""
    if not downstream.score_every or not downstream.choice_tasks:
        return None
    tasks: dict[str, ZeroShotTask] = {}
    for task in map(fast_twin, map(str, downstream.choice_tasks)):
        if task_name(task) not in tasks:
            tasks[task_name(task)] = fast_subset(read_zero_shot(task), int(downstream.curve_items))
    return TaskCurves(int(downstream.score_every), tuple(tasks.items()), int(downstream.batch_size), config)
