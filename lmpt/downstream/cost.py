"""What scoring a run's downstream tasks costs, estimated before the run (the study's time plan): the tokens the
scoring passes through a model, each task kind counting its own (`TaskKind.scoring_tokens`), then FLOPs and seconds
at the model's forward cost per token, the rate lmpt plans training with.

Texts are counted in characters, CHARS_PER_TOKEN (lmpt.downstream.kinds.base) to a token: no tokenizer exists before
the run. A zero-shot choice is one row of its context and choice read left to right; a pseudo-log-likelihood reads a
row per scored token; an objective with its own scorer (mdlm) a row per draw. A fine-tuning counts examples through
the body as its progress bar does (a training pass weighing three forward passes), its recipe search included. Each
model scored (the run's, and its untrained control) counts once; curve points count their fast subsets every
downstream.score_every steps."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from lmpt.config.schema import DownstreamConfig
from lmpt.downstream.curves import fast_subset, fast_twin
from lmpt.downstream.kinds.base import ScoringRun
from lmpt.downstream.kinds.registry import fine_tuned_kind, zero_shot_kind
from lmpt.objectives.base import Objective, Reading
from lmpt.objectives.schema import ObjectiveConfig


def scoring_tokens(run: ScoringRun) -> float:
    """Tokens every downstream task of `run` passes through the models scored, when the run ends."""
    total = 0.0
    for i, task in enumerate(run.downstream.choice_tasks):
        total += zero_shot_kind(str(task)).scoring_tokens(str(task), f"downstream.choice_tasks[{i}]", run)
    for i, task in enumerate(run.downstream.classification_tasks):
        total += fine_tuned_kind(str(task)).scoring_tokens(str(task), f"downstream.classification_tasks[{i}]", run)
    return total * run.models


def curve_tokens(run: ScoringRun, steps: int) -> float:
    """Tokens the curve points of a run of `steps` steps pass through it: each choice task's fast subset every
    downstream.score_every steps (the last step's point is the end-of-run scoring's)."""
    every = int(run.downstream.score_every or 0)
    if every <= 0 or steps <= every:
        return 0.0
    points = (steps - 1) // every
    total, one = 0.0, replace(run, models=1)  # a curve point scores the run's model alone
    for task in map(fast_twin, map(str, run.downstream.choice_tasks)):
        kind = zero_shot_kind(task)
        questions = kind.as_questions(fast_subset(kind.read(task), int(run.downstream.curve_items)))
        total += sum(one.choice_tokens(q.context, c) for q in questions for c in q.choices)
    return total * points


def scoring_flops(
    downstream: DownstreamConfig, objective: Objective, objective_cfg: ObjectiveConfig, model: Any, steps: int
) -> float:
    """FLOPs a run of `objective` (built, with its config `objective_cfg`) training `model` for `steps` steps spends
    on `downstream`'s tasks: its curve points and its scoring when it ends, the untrained control's included."""
    if not (downstream.choice_tasks or downstream.classification_tasks):
        return 0.0
    reading = objective.reading(objective.arch)
    run = ScoringRun(
        arch=objective.arch,
        seq_len=objective.seq_len,
        downstream=downstream,
        row_per_scored_token=reading is Reading.PSEUDO_LIKELIHOOD,
        rows_per_choice=int(getattr(objective_cfg, "score_draws", 1) or 1) if reading is Reading.OWN else 1,
        models=2 if downstream.control == "scratch" else 1,
    )
    forward_per_token = model.flops_per_example(run.seq_len, 0, 1.0) / (3 * run.seq_len)  # a third of training's
    return (scoring_tokens(run) + curve_tokens(run, steps)) * forward_per_token
