"""The fine-tuning recipe (`RecipeSpace`: the learning rates and poolings a fine-tuning may use) and its search
(`search_recipe`, `lr=search`, lmpt-finetune's default): a learning rate from a grid and, for an encoder whose pooling
is left at auto, first-token against mean pooling, each candidate trained once (the first seed, for `search_epochs`)
on the training split less a slice held back from it and scored on that slice. The dev split is never read: the
reported figures stay out of the choice. The candidate with the best figure on the slice (the task's headline:
accuracy, a regression's Pearson) wins (the first listed on a tie), and every seed then trains on the whole training
split with it.

Why: at one fixed learning rate an mlm encoder can sit at chance while at 1e-3 it learns the task, and mean pooling
can stall where first-token pooling does not (docs: what the study measured), so a fixed recipe ranks objectives by
how well they suit it. GLUE practice searches it per model; so does this, per model and per control."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from lmpt.config.command_options import require
from lmpt.downstream.classifier import POOLINGS, resolve_pooling
from lmpt.downstream.figures import (
    ACCURACY,
)
from lmpt.downstream.seed_figures import Candidate, Search
from lmpt.downstream.seeds import SeedPlan, run_seeds, seeds_work, steps_per_seed
from lmpt.errors import LmptError
from lmpt.inference.progress import WorkBar
from lmpt.rng import generator

if TYPE_CHECKING:
    from lmpt.downstream.encoding import EncodedSplit
    from lmpt.downstream.options import FinetuneOptions

SEARCH = "search"
DEFAULT_LR = {"full": 1e-4, "probe": 1e-2}
"""lr=null: the fixed learning rate of each mode."""
DEFAULT_GRID = {"full": (1e-4, 3e-4, 1e-3, 3e-3), "probe": (1e-3, 3e-3, 1e-2, 3e-2)}
"""lr=search with lr_grid=null: the learning rates tried in each mode."""
SEARCHED_POOLINGS = {"encoder": ("mean", "first")}
"""Poolings lr=search tries when pooling=auto; an architecture not listed keeps its default."""
MIN_SEARCH_TRAIN = 100
"""Training examples that must remain beside the held-back slice for a search to mean anything."""


def parse_lr(value: str | float | None) -> str | float | None:
    """lr= as given: "search", a float, or None (the mode's fixed default)."""
    if value is None or (isinstance(value, int | float) and not isinstance(value, bool)):
        return None if value is None else float(value)
    text = str(value).strip().lower()
    if text == SEARCH:
        return SEARCH
    try:
        return float(text)
    except ValueError:
        raise LmptError(f"lr={value} is not a learning rate: give a number, search or null") from None


def check_recipe_settings(o: FinetuneOptions) -> None:
    """lr, lr_grid, search_fraction and search_epochs in range (no model needed)."""
    lr = parse_lr(o.lr)
    if isinstance(lr, float):
        require(math.isfinite(lr), f"lr={o.lr} must be a finite number")
        require(lr > 0, f"lr={o.lr} must be positive")
    if o.lr_grid is not None:
        require(len(o.lr_grid) > 0, "lr_grid=[] is empty: give at least one learning rate, e.g. lr_grid=[1e-4,1e-3]")
        for raw in o.lr_grid:
            try:
                value = float(raw)
            except (TypeError, ValueError):
                value = math.nan
            require(math.isfinite(value) and value > 0, f"lr_grid holds {raw}: each must be a positive finite number")
    require(0 < o.search_fraction <= 0.5, f"search_fraction={o.search_fraction} must be in (0, 0.5]")
    require(o.search_epochs >= 1, f"search_epochs={o.search_epochs} must be at least 1")


@dataclass(frozen=True)
class RecipeSpace:
    """The recipes a fine-tuning may use: one (fixed), or the candidates of a search."""

    lrs: tuple[float, ...]
    poolings: tuple[str, ...]
    searched: bool

    @property
    def candidates(self) -> list[tuple[float, str]]:
        """(lr, pooling) in the order they are tried (and win ties): the default pooling first, lower lr first."""
        return [(lr, pooling) for pooling in self.poolings for lr in self.lrs]


def recipe_space(arch: str, o: FinetuneOptions) -> RecipeSpace:
    """The recipes of `o` for `arch`; a fixed pooling that does not fit `arch` is refused."""
    lr = parse_lr(o.lr)
    if lr != SEARCH:
        return RecipeSpace((lr or DEFAULT_LR[o.mode],), (resolve_pooling(arch, o.pooling),), False)  # type: ignore[arg-type]
    poolings = SEARCHED_POOLINGS.get(arch, POOLINGS[arch][:1]) if o.pooling == "auto" else None
    grid = tuple(float(v) for v in o.lr_grid) if o.lr_grid is not None else DEFAULT_GRID[o.mode]
    return RecipeSpace(tuple(sorted(set(grid))), poolings or (resolve_pooling(arch, o.pooling),), True)


def held_out_count(n_train: int, fraction: float) -> int:
    """Training examples the search holds back: `fraction` of them, at least one."""
    return max(1, round(n_train * fraction))


def check_search_size(n_train: int, o: FinetuneOptions) -> None:
    """Refuse a search that would leave fewer than MIN_SEARCH_TRAIN training examples to train its candidates on."""
    held = held_out_count(n_train, o.search_fraction)
    if n_train - held < MIN_SEARCH_TRAIN:
        raise LmptError(
            f"lr=search holds back {held} of the {n_train} training examples (search_fraction={o.search_fraction}) "
            f"and leaves {n_train - held}, fewer than {MIN_SEARCH_TRAIN}: give lr=X (and pooling=X), or more "
            "training examples"
        )


def search_steps(n_train: int, o: FinetuneOptions) -> int:
    """Optimizer steps of one search candidate."""
    fit = n_train - held_out_count(n_train, o.search_fraction)
    return steps_per_seed(fit, o.batch_size, o.search_epochs, o.max_steps)


def search_work(n_train: int, o: FinetuneOptions, probe: bool) -> int:
    """One search candidate's work in examples through the body (`seeds_work`: the progress bar's unit)."""
    held = held_out_count(n_train, o.search_fraction)
    return seeds_work(n_train - held, held, o.batch_size, search_steps(n_train, o), 1, probe)


def search_slice(n_train: int, fraction: float, seed: int) -> tuple[list[int], list[int]]:
    """(indices trained on, indices held back) of the training split, each sorted; drawn from `seed` alone."""
    order = torch.randperm(n_train, generator=generator(seed, "finetune", "search-slice")).tolist()
    held = held_out_count(n_train, fraction)
    return sorted(order[held:]), sorted(order[:held])


PlanMaker = Callable[[float, str, int, int], SeedPlan]
"""(lr, pooling, training examples, epochs) -> the SeedPlan of that recipe."""


def search_recipe(
    make_plan: PlanMaker,
    train: EncodedSplit,
    space: RecipeSpace,
    o: FinetuneOptions,
    probe: bool,
    bar: WorkBar,
    label: str = "",
    figure: str = ACCURACY,
) -> Search:
    """The search: every candidate of `space` trained on `train` less the held-back slice,
    scored on the slice by `figure` (the task's headline; higher is better). Only the training split is passed in: dev
    cannot reach the choice. `bar` shows `label` and the candidate running."""
    fit, held = search_slice(len(train), o.search_fraction, o.seed)
    splits = {"train": train.subset(fit), "": train.subset(held)}
    tried, first_seed = [], range(o.seed, o.seed + 1)
    for i, (lr, pooling) in enumerate(space.candidates, 1):
        plan = make_plan(lr, pooling, len(fit), o.search_epochs)
        phase = f"{label} recipe search {i}/{len(space.candidates)} (lr {lr:g}, {pooling} pooling)".lstrip()
        figures = run_seeds(plan, splits, probe, first_seed, bar, phase=phase).per_seed[0]
        tried.append(Candidate(lr, pooling, {figure: figures[figure], "train_loss": figures["train_loss"]}))
    best = max(tried, key=lambda c: c.figures[figure])  # the first of equals: the default pooling, the lower lr
    return Search(
        best.lr,
        best.pooling,
        len(held),
        len(fit),
        o.search_fraction,
        o.seed,
        o.search_epochs,
        search_steps(len(train), o),
        f"{figure} on the held-back slice of the training split",
        tuple(tried),
    )
