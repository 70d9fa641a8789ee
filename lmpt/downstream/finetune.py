"""`finetune(trained, options) -> FineTuning`: fine-tune a pre-trained run on a labelled task once per seed and score
each run on dev (and test): accuracy, macro-F1 and, for two classes, Matthews correlation, each as mean and sample
standard deviation over seeds with the per-seed figures. The recipe is searched on a slice of the training split
(lr=search, lmpt.downstream.finetune) unless fixed. With control=scratch the same architecture freshly initialised
(lmpt.downstream.control) goes through the same search, seeds and data, a bag-of-words floor is fit, and the gain over
the control carries a 95% interval paired over (seed, item) (lmpt.downstream.significance). A GLUE task (read from
data.dir) adds its official figures and score to every seed's and the floor's (lmpt.downstream.glue), so a run's GLUE
entry records and ranks by them as `task=glue` does. Every input is read and checked before any training, so a bad task
file costs nothing and writes nothing. mode=probe computes the frozen body's pooled features once, standardises them
with the training split's mean and std, and trains the head on them. `lmpt-finetune` keeps the result as a hand run's
record (lmpt.downstream.finetune_cli).

The fine-tuning recipe (`lr=search`, lmpt-finetune's default): a learning rate from a grid and, for an encoder
whose pooling is left at auto, first-token against mean pooling, each candidate trained once (the first seed, for
`search_epochs`) on the training split less a slice held back from it and scored on that slice. The dev split is
never read: the reported figures stay out of the choice. The candidate with the best accuracy on the slice wins (the
first listed on a tie), and every seed then trains on the whole training split with it.

Why: at one fixed learning rate an mlm encoder can sit at chance while at 1e-3 it learns the task, and mean pooling
can stall where first-token pooling does not (docs: what the study measured), so a fixed recipe ranks objectives
by how well they suit it. GLUE practice searches it per model; so does this, per model and per control.

`tune` fine-tunes one model on a task: it searches the recipe when asked, then trains and scores the model once per
seed with the recipe chosen. The run's model and its scratch control each go through it, so they get the same search,
seeds and data.

One fine-tuned control per architecture and size, shared by every run that has it. A scratch control
(lmpt.downstream.control) depends on nothing a run trained: its fresh weights, the task's tokens, the recipe and the
code. Two runs whose controls agree on all of them (clm and gpt-bert at one seed; one objective at two budgets) would
fine-tune the same control bit for bit, so the first stores it and the others read it back: the cache directory's
controls/KEY.json ($LMPT_CACHE_DIR or ~/.cache/lmpt, as tokenizers), KEY a digest of every input and of lmpt's own
source, so a change to any of them, the code included, makes a new entry instead of reusing a stale one. An entry is
whole or absent (lmpt.safe_files.write_atomically) and carries a digest of its own content (the entry's codec,
below); one changed since it was stored, malformed or unreadable is named in one
line and fine-tuned again, and the record names the digest of the entry its figures came from.

The codec of a shared control's cache entry: a fine-tuned scratch control
as JSON, with a digest of its own content. Reading one back checks the digest and every field's type and shape against
the task it is read for, so an entry changed after it was stored, or one malformed (outcome strings of another length,
a figure stored as a string), is refused with the reason instead of trusted or crashing the run. Per-item outcomes are
kept as the target scores them: right/wrong as one '0'/'1' string a seed (classes), or one list of numbers a seed (a
regression's negated squared errors), so a regression's control is shared as a classification's is."""

from __future__ import annotations

import copy
import dataclasses
import functools
import hashlib
import json
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from rich.markup import escape

from lmpt.config.command_options import require
from lmpt.config.schema import CONTROLS, FINETUNE_MODES, TrainerConfig
from lmpt.console import warn
from lmpt.downstream.control import scratch_model
from lmpt.downstream.figures import (
    ACCURACY,
    BAG_OF_WORDS,
    SCRATCH,
    UNLABELLED,
    mean_and_std,
    mean_of,
)
from lmpt.downstream.official import SCORED_SPLITS, TaskMetric, official_figures
from lmpt.downstream.seed_figures import Candidate, Search
from lmpt.downstream.significance import Gain, decode_outcomes, encode_outcomes, paired_gain
from lmpt.downstream.sources import FinetuneOptions, LabelledTask, capped, check_trainable, labelled_name, read_labelled
from lmpt.downstream.training import (
    CLASSES,
    POOLINGS,
    EncodedSplit,
    EncodedTask,
    SeedPlan,
    SeedRuns,
    SequenceClassifier,
    Target,
    encode_task,
    resolve_pooling,
    run_seeds,
    seeds_work,
    steps_per_seed,
)
from lmpt.errors import LmptError
from lmpt.inference.progress import WorkBar
from lmpt.model import LanguageModel
from lmpt.rng import generator
from lmpt.rundir.trained import Trained
from lmpt.safe_files import write_atomically
from lmpt.tokenizer.special import SpecialTokens
from lmpt.train.precision import Precision, pick_precision


def check_settings(o: FinetuneOptions) -> None:
    """The options that need no model, checked at start-up: every number finite and in range."""
    for key in ("warmup", "weight_decay", "dropout"):
        value = getattr(o, key)
        require(value is None or math.isfinite(value), f"{key}={value} must be a finite number")
    require(o.mode in FINETUNE_MODES, f"mode={o.mode} is unknown: use {' or '.join(FINETUNE_MODES)}")
    require(o.control in CONTROLS, f"control={o.control} is unknown: use {' or '.join(CONTROLS)}")
    check_recipe_settings(o)
    require(o.seeds >= 1, f"seeds={o.seeds} must be at least 1")
    require(o.epochs >= 1, f"epochs={o.epochs} must be at least 1")
    require(o.max_steps is None or o.max_steps >= 1, f"max_steps={o.max_steps} must be at least 1 (or null)")
    require(o.batch_size >= 1, f"batch_size={o.batch_size} must be at least 1")
    require(0 <= o.warmup < 1, f"warmup={o.warmup} must be in [0, 1)")
    require(0 <= o.dropout < 1, f"dropout={o.dropout} must be in [0, 1)")
    require(o.weight_decay >= 0, f"weight_decay={o.weight_decay} must be at least 0")
    require(
        o.precision in (None, "fp32", "bf16", "fp16"), f"precision={o.precision} is unknown: use fp32, bf16 or fp16"
    )


def check_task(
    o: FinetuneOptions,
    max_seq_len: int,
    run_seq_len: int,
    target: Target = CLASSES,
    labelled: LabelledTask | None = None,
) -> tuple[int, LabelledTask]:
    """What a fine-tuning can check without a model, so `lmpt` checks it at start-up (before training the model
    it will fine-tune) and `finetune` before any fine-tuning: the options, the input length (`o.seq_len`, else the
    run's data.seq_len `run_seq_len`, at most the model's `max_seq_len`) and the task's files and labels (read as
    `target` reads them; `labelled`: the task read already, by a reader of its own). Returns (the input length, the
    task read)."""
    check_settings(o)
    seq_len = min(o.seq_len or run_seq_len, max_seq_len)
    checked = o.seq_len or seq_len
    named = f"seq_len={checked}" + ("" if o.seq_len else " (the run's data.seq_len)")
    require(8 <= checked <= max_seq_len, f"{named} must be in [8, {max_seq_len}] (the model's max_seq_len)")
    require(
        o.max_train_examples is None or o.max_train_examples >= 1,
        f"max_train_examples={o.max_train_examples} must be at least 1 (or null: every example)",
    )
    labelled = capped(
        labelled or read_labelled(o.data, labelled_name(o), target.numeric_labels), o.max_train_examples, o.seed
    )
    check_trainable(labelled, o)
    if parse_lr(o.lr) == SEARCH:
        check_search_size(len(labelled.examples["train"]), o)
    return seq_len, labelled


@dataclass(frozen=True)
class ScratchControl:
    """The untrained control fine-tuned beside the run's model (lmpt.downstream.control), and what the model is held
    against: the bag-of-words floor and the gains over the control."""

    tuned: Tuned
    """Its recipe, search and seeds; fine-tuned here, or read back from the shared cache (`shared`)."""
    init_seed: int
    """The seed its fresh weights were drawn from: the run's trainer.seed."""
    key: str
    """Its entry in the shared cache (controls/KEY.json)."""
    shared: bool
    """Read back from the cache, fine-tuned for an earlier run with the same control."""
    entry_digest: str | None
    """The digest of the cache entry its figures came from (None: the cache could not be written)."""
    floor: dict[str, Any]
    """The bag-of-words floor's figures (its method first), keyed as the fine-tuning's."""
    floor_predictions: dict[str, list]
    """The floor's predictions by split prefix ("" dev, "test_" test)."""
    gains: dict[str, Gain]
    """By figure (dev, test_), the gain of the run's model over the control with its paired interval."""


@dataclass(frozen=True)
class FineTuning:
    """A run fine-tuned on a task (`finetune`): the task and how it was fine-tuned, the run's model (its recipe, the
    search that chose it, its figures per seed and its predictions) and, with control=scratch, its control."""

    task: EncodedTask
    options: FinetuneOptions
    objective: str
    arch: str
    weights: str
    seq_len: int
    precision: str
    baseline: dict[str, float]
    """The trivial baseline's figures on dev (the majority class's accuracy; a regression's mean prediction's MSE)."""
    pretrained: Tuned
    metrics: tuple[str, ...] = ()
    """The task's own metrics (a GLUE task's official ones), each seed's figures and the floor's carry, with the
    task's score."""
    control: ScratchControl | None = None

    def predictions(self) -> dict[str, dict[str, list[list]]]:
        """By model ("pretrained", "scratch", "bag_of_words") and split (its figures' prefix, and UNLABELLED), each
        seed's prediction of each item (a class id, or a number; the floor's one fit as one seed). A control read
        back from the shared cache brings its scored splits'."""
        models = {"pretrained": self.pretrained}
        if self.control is not None:
            models[SCRATCH] = self.control.tuned
        found = {
            name: {split: rows.tolist() for split, rows in (tuned.runs.predictions or {}).items()}
            for name, tuned in models.items()
        }
        if self.control is not None:
            found[BAG_OF_WORDS] = {split: [rows] for split, rows in self.control.floor_predictions.items()}
        return found


def finetune(
    trained: Trained,
    o: FinetuneOptions,
    target: Target = CLASSES,
    labelled: LabelledTask | None = None,
) -> FineTuning:
    """Fine-tune `trained` (left unchanged) on the task `o.data` names (or `labelled`, read already), predicting
    `target`, `o.seeds` times, and with control=scratch its freshly initialised twin beside it (read back from the
    shared cache when an earlier run fine-tuned the same control). Each seed's figures are its kind's and the task's
    own metrics (with the task's score); its unlabelled examples are predicted too, never scored. Bad input raises
    LmptError before any training."""
    space = recipe_space(trained.arch, o)  # a pooling that does not fit the architecture: refused first
    seq_len, labelled = check_task(o, trained.model.max_seq_len, int(trained.config.data.seq_len), target, labelled)
    task = encode_task(trained, labelled, seq_len, target)
    device = trained.model.head_weight.device
    precision = pick_precision(TrainerConfig(precision=o.precision, amp=o.amp), device)
    bodies = {"pretrained": trained.model if o.mode == "probe" else copy.deepcopy(trained.model)}  # probe only reads
    metrics = labelled.metrics
    floor, key, shared = None, None, None
    floor_predictions: dict[str, list] = {}
    if o.control == SCRATCH:
        scratch = scratch_model(trained)
        names = tuple(m.name for m in metrics)
        key = control_key(scratch, task, o, space, precision.name, trained.tokenizer.special, trained.arch, names)
        shape = {p: (o.seeds, len(s)) for p, s in (("", task.dev), ("test_", task.test)) if s is not None}
        shared = read_control(key, shape, target, o.json)  # the same control fine-tuned for another run
        if shared is None:
            bodies[SCRATCH] = scratch
        floor = target.floor(task.examples, task.classes, floor_predictions)  # cheap; any failure before training
    doing = f"{task.name} {'probe' if o.mode == 'probe' else 'fine-tune'}"
    labels = {"pretrained": doing, SCRATCH: f"{doing} (scratch control)"}
    with WorkBar(doing, hidden=o.json, unit="example passes") as bar:
        bar.start(len(bodies) * tuning_work(task, o, space))
        tuned = {
            name: tune(body, task, o, space, precision, trained.tokenizer.special, trained.arch, bar, labels[name])
            for name, body in bodies.items()
        }
    gold = {split: [e.label for e in task.examples[split]] for split in SCORED_SPLITS if split in task.examples}
    for t in tuned.values():  # before a control is stored: one read back carries them too
        _add_official(metrics, gold, task.classes, t)
    if floor is not None:
        floor |= official_figures(metrics, gold, floor_predictions, task.classes)
    control = None
    if floor is not None and key is not None:
        if shared is None:  # fine-tuned here: kept for the next run with the same control, where the cache may
            stored = store_control(key, tuned[SCRATCH])
        fine_tuned, entry = shared or (tuned[SCRATCH], stored)
        gains = _gains(tuned["pretrained"], fine_tuned, target.gain_figure)
        seed = int(trained.config.trainer.seed)
        control = ScratchControl(fine_tuned, seed, key, shared is not None, entry, floor, floor_predictions, gains)
    baseline = target.baseline(task.examples, task.dev.labels, task.classes)
    return FineTuning(
        task,
        o,
        trained.objective_name,
        trained.arch,
        str(trained.weights),
        seq_len,
        precision.name,
        baseline,
        tuned["pretrained"],
        tuple(m.name for m in metrics),
        control,
    )


def _add_official(
    metrics: tuple[TaskMetric, ...], gold: dict[str, list[str]], classes: list[str], tuned: Tuned
) -> None:
    """Each seed's figures of the task's own `metrics` and the task's score, from the seed's predictions against the
    `gold` labels by split, into its figures (none for a task without metrics of its own)."""
    predictions = tuned.runs.predictions or {}
    for i, row in enumerate(tuned.runs.per_seed):
        predicted = {p: predictions[p][i].tolist() for p in SCORED_SPLITS.values() if p in predictions}
        row |= official_figures(metrics, gold, predicted, classes)


def _gains(pretrained: Tuned, control: Tuned, figure: str = ACCURACY) -> dict[str, Gain]:
    """The gain of `figure` (dev and test) over the control with its paired interval, from the per-item outcomes
    (higher better) of both."""
    gains = {}
    for prefix, correct in pretrained.runs.correct.items():
        gain = paired_gain(correct.numpy(), control.runs.correct[prefix].numpy())
        key = prefix + figure
        means = {"pretrained": seed_mean(pretrained, key), SCRATCH: seed_mean(control, key)}
        found = Gain.from_json({**means, **gain})
        assert found is not None
        gains[key] = found
    return gains


def seed_mean(tuned: Tuned, figure: str) -> float:
    """The mean over seeds of `figure` of one tuned model."""
    return mean_and_std(tuned.runs.per_seed)[mean_of(figure)]


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
    """One search candidate's work in examples through the body (training.seeds_work: the progress bar's unit)."""
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


@dataclass
class Tuned:
    """One model fine-tuned: the recipe it used, the search that chose it (None when fixed) and its seeds."""

    lr: float
    pooling: str
    steps: int
    """Optimizer steps of each seed."""
    runs: SeedRuns
    search: Search | None


def tuning_work(task: EncodedTask, o: FinetuneOptions, space: RecipeSpace) -> int:
    """One model's fine-tuning, search included, in examples through the body (training.seeds_work): the progress
    bar's total."""
    n_scored = sum(len(s) for s in (task.dev, task.test, task.unlabelled) if s is not None)
    return examples_work(len(task.train), n_scored, o, space)


def examples_work(n_train: int, n_scored: int, o: FinetuneOptions, space: RecipeSpace) -> int:
    """`tuning_work` of `n_train` training and `n_scored` scored examples (also what the study's plan counts before
    any task is encoded)."""
    probe = o.mode == "probe"
    steps = steps_per_seed(n_train, o.batch_size, o.epochs, o.max_steps)
    work = seeds_work(n_train, n_scored, o.batch_size, steps, o.seeds, probe)
    return work + (len(space.candidates) * search_work(n_train, o, probe) if space.searched else 0)


def tune(
    body: LanguageModel,
    task: EncodedTask,
    o: FinetuneOptions,
    space: RecipeSpace,
    precision: Precision,
    special: SpecialTokens,
    arch: str,
    bar: WorkBar,
    label: str = "",
) -> Tuned:
    """Fine-tune `body` (its weights restored before every seed and candidate; a probe never changes them); `bar`
    shows `label` (the task and model) and the phase running."""
    probe = o.mode == "probe"
    pretrained = None if probe else {k: v.clone() for k, v in body.state_dict().items()}
    outputs = task.target.outputs(task.classes)
    classifier = SequenceClassifier(body, space.poolings[0], outputs, o.dropout).to(precision.device)
    if o.compile:
        classifier.compile_body()

    def make_plan(lr: float, pooling: str, n_train: int, epochs: int) -> SeedPlan:
        classifier.pooling = pooling  # the head reads a d_model vector whatever the pooling: one classifier serves
        steps = steps_per_seed(n_train, o.batch_size, epochs, o.max_steps)
        return SeedPlan(
            classifier,
            pretrained,
            precision,
            arch,
            special,
            o.batch_size,
            steps,
            lr,
            round(o.warmup * steps),
            o.weight_decay,
            task.classes,
            task.target,
        )

    lr, pooling, search = space.lrs[0], space.poolings[0], None
    if space.searched:
        search = search_recipe(make_plan, task.train, space, o, probe, bar, label, task.target.headline)
        lr, pooling = search.lr, search.pooling
    plan = make_plan(lr, pooling, len(task.train), o.epochs)
    splits = {"train": task.train, "": task.dev, "test_": task.test, UNLABELLED: task.unlabelled}
    runs = run_seeds(plan, splits, probe, range(o.seed, o.seed + o.seeds), bar, phase=label)
    return Tuned(lr, pooling, plan.steps, runs, search)


CONTROLS_DIR = "controls"
UNKEYED_OPTIONS = ("data", "task", "json", "control", "device")
"""FinetuneOptions that do not change what the control computes (the files are in the key as their tokens; the
device as the weights' and the precision's)."""


@functools.cache
def code_digest() -> str:
    """A digest of lmpt's source files: a control stored by other code is never read back."""
    digest = hashlib.sha256()
    root = Path(__file__).resolve().parents[2]  # lmpt/
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode() + b"\x00" + path.read_bytes())
    return digest.hexdigest()


def _tensor_bytes(tensor: torch.Tensor) -> bytes:
    return tensor.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes()


def control_key(
    body: LanguageModel,
    task: EncodedTask,
    o: FinetuneOptions,
    space: RecipeSpace,
    precision: str,
    special: SpecialTokens,
    arch: str,
    metrics: tuple[str, ...] = (),
) -> str:
    """The digest of everything the control's fine-tuning reads: its weights, the task's token rows and labels, the
    recipe (options and search space), the precision, the architecture, the special tokens, torch and lmpt's code;
    `metrics`: the task's own metrics its seeds carry (a control without them never stands in)."""
    digest = hashlib.sha256()
    for name, tensor in sorted(body.state_dict().items()):
        digest.update(name.encode() + str(tensor.dtype).encode() + str(tuple(tensor.shape)).encode())
        digest.update(_tensor_bytes(tensor))
    for split in (task.train, task.dev, task.test):
        if split is None:
            digest.update(b"no split")
            continue
        for rows in (split.rows, split.segments or []):
            for row in rows:
                digest.update(_tensor_bytes(row) + b"\x00")
        digest.update(_tensor_bytes(split.labels))
    options = {k: v for k, v in dataclasses.asdict(o).items() if k not in UNKEYED_OPTIONS}
    settings = {
        "classes": task.classes,
        "options": options,
        "space": dataclasses.asdict(space),
        "precision": precision,
        "arch": arch,
        "special": dataclasses.asdict(special),
        "torch": torch.__version__,
        "code": code_digest(),
        "metrics": list(metrics),
    }
    digest.update(json.dumps(settings, sort_keys=True, default=str).encode())
    return digest.hexdigest()[:32]


def controls_dir() -> Path:
    from lmpt.data.cache import default_cache_root

    return default_cache_root(None) / CONTROLS_DIR


def read_control(key: str, shape: Shape, target: Target, hidden: bool = False) -> tuple[Tuned, str] | None:
    """The control stored under `key` and its content digest, or None: none stored, or an entry that cannot be
    trusted (its content changed since it was stored, or malformed for a task of `shape` predicting `target`
    (control_entry.decode_entry)), which one line names
    before the control is fine-tuned again (and the entry replaced): a console warning, or with `hidden` (json=true:
    stdout holds the JSON alone) a line on stderr."""
    path = controls_dir() / f"{key}.json"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return None  # none stored (or unreadable as a file): the control is fine-tuned, nothing more to say
    try:
        return decode_entry(json.loads(text), shape, target)
    except (ValueError, RecursionError) as exc:  # EntryProblem is a ValueError, as is JSON that does not parse
        reason = str(exc) if isinstance(exc, EntryProblem) else "is not JSON"
        said = f"the shared control {path} {reason}: fine-tuning the control again in its place"
        if hidden:
            print(f"lmpt: warning: {said}", file=sys.stderr)
        else:
            warn(escape(said))
        return None


def store_control(key: str, tuned: Tuned) -> str | None:
    """Keep `tuned` under `key` for the next run with the same control; the digest of its content, or None when the
    cache cannot be written (the control is then fine-tuned again next time, nothing more)."""
    path = controls_dir() / f"{key}.json"
    try:
        entry = encode_entry(tuned)
        path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(entry, allow_nan=False)
        write_atomically(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    except (OSError, ValueError, LmptError):
        return None
    return str(entry[DIGEST])


DIGEST, CONTROL = "digest", "control"
"""The entry file's two keys: the digest of the control's JSON, and that JSON."""

Shape = dict[str, tuple[int, int]]
"""Per scored split (its figures' prefix: "" dev, "test_" test), the (seeds, items) its outcomes must have."""


class EntryProblem(ValueError):
    """Why a cache entry cannot be trusted, in words that follow its file name."""


def content_digest(control: dict) -> str:
    """The sha256 of `control` as canonical JSON (sorted keys, no spaces)."""
    text = json.dumps(control, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()


def encode_entry(tuned: Tuned) -> dict:
    """`tuned` as an entry: {"digest": ..., "control": ...}."""
    runs = tuned.runs
    correct = {split: [_encode_row(row) for row in rows.numpy()] for split, rows in runs.correct.items()}
    predictions = {split: (runs.predictions or {})[split].tolist() for split in runs.correct}
    control = {
        "lr": tuned.lr,
        "pooling": tuned.pooling,
        "steps": tuned.steps,
        "search": tuned.search.to_json() if tuned.search is not None else None,
        "runs": {
            "per_seed": runs.per_seed,
            "correct": correct,
            "predictions": predictions,
            "examples": runs.examples,
            "seconds": runs.seconds,
        },
    }
    return {DIGEST: content_digest(control), CONTROL: control}


def _encode_row(row: np.ndarray) -> str | list[float]:
    """One seed's per-item outcomes: right/wrong as a '0'/'1' string, numbers (a regression's) as a list."""
    return encode_outcomes(row) if row.dtype == np.bool_ else [float(v) for v in row]


def _number(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise EntryProblem(f"has {what} = {value!r}, not a finite number")
    return float(value)


def _count(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise EntryProblem(f"has {what} = {value!r}, not a count")
    return value


def _typed(value: object, kind: type, what: str) -> object:
    if not isinstance(value, kind):
        raise EntryProblem(f"has {what} of type {type(value).__name__}, not {kind.__name__}")
    return value


def _per_seed(rows: object, shape: Shape, headline: str) -> list[dict]:
    seeds = {n for n, _ in shape.values()}
    _typed(rows, list, "runs.per_seed")
    assert isinstance(rows, list)
    if len(rows) not in seeds or not all(isinstance(r, dict) for r in rows):
        raise EntryProblem(f"has {len(rows)} per-seed records where {sorted(seeds)} seed(s) were run")
    for i, row in enumerate(rows):
        _count(row.get("seed"), f"runs.per_seed[{i}].seed")
        for prefix in shape:
            _number(row.get(prefix + headline), f"runs.per_seed[{i}].{prefix}{headline}")
        for name, value in row.items():
            if value is not None:
                _number(value, f"runs.per_seed[{i}].{name}")
        if set(row) != set(rows[0]):
            raise EntryProblem(f"has per-seed records with different figures (seed {i})")
    return rows


def _search(search: object, headline: str) -> Search | None:
    """A search record as the console describes it (lmpt-finetune's describe_search), or None (a fixed recipe)."""
    if search is None:
        return None
    _typed(search, dict, "search")
    assert isinstance(search, dict)
    _count(search.get("held_out"), "search.held_out")
    _count(search.get("steps"), "search.steps")
    candidates = _typed(search.get("candidates"), list, "search.candidates")
    assert isinstance(candidates, list)
    for i, candidate in enumerate(candidates):
        _typed(candidate, dict, f"search.candidates[{i}]")
        _number(candidate.get("lr"), f"search.candidates[{i}].lr")
        _typed(candidate.get("pooling"), str, f"search.candidates[{i}].pooling")
        _number(candidate.get(headline), f"search.candidates[{i}].{headline}")
    found = Search.from_json(search)
    if found is None:
        raise EntryProblem("has a search record that is not one a search writes")
    return found


def _number_rows(rows: list, seeds: int, items: int, split: str) -> torch.Tensor:
    """A regression's outcomes: `seeds` lists of `items` finite numbers."""
    if len(rows) != seeds or any(not isinstance(r, list) or len(r) != items for r in rows):
        lengths = [len(r) if isinstance(r, list) else type(r).__name__ for r in rows]
        raise EntryProblem(
            f"has per-item outcomes {lengths} for {split or 'dev'}, where {seeds} list(s) of {items} numbers "
            "were stored"
        )
    values = [[_number(v, f"runs.correct[{split!r}][{s}][{i}]") for i, v in enumerate(r)] for s, r in enumerate(rows)]
    return torch.tensor(values, dtype=torch.float64)


def _outcomes(correct: object, shape: Shape, numbers: bool) -> dict[str, torch.Tensor]:
    _typed(correct, dict, "runs.correct")
    assert isinstance(correct, dict)
    if set(correct) != set(shape):
        raise EntryProblem(f"holds outcomes of the splits {sorted(correct)}, not {sorted(shape)}")
    decoded = {}
    for split, (seeds, items) in shape.items():
        rows = _typed(correct[split], list, f"runs.correct[{split!r}]")
        assert isinstance(rows, list)
        if numbers:
            decoded[split] = _number_rows(rows, seeds, items, split)
            continue
        outcomes = [decode_outcomes(row) for row in rows]
        if len(rows) != seeds or any(o is None or o.size != items for o in outcomes):
            lengths = [len(r) if isinstance(r, str) else type(r).__name__ for r in rows]
            raise EntryProblem(
                f"has per-item outcomes {lengths} for {split or 'dev'}, where {seeds} string(s) of {items} "
                "'0'/'1' were stored"
            )
        decoded[split] = torch.from_numpy(np.stack(outcomes))  # type: ignore[arg-type]
    return decoded


def _predictions(predictions: object, shape: Shape, numbers: bool) -> dict[str, torch.Tensor]:
    """Each scored split's predictions, [seeds, items]: class ids, or numbers where the labels are numbers."""
    _typed(predictions, dict, "runs.predictions")
    assert isinstance(predictions, dict)
    if set(predictions) != set(shape):
        raise EntryProblem(f"holds predictions of the splits {sorted(predictions)}, not {sorted(shape)}")
    decoded = {}
    for split, (seeds, items) in shape.items():
        rows = _typed(predictions[split], list, f"runs.predictions[{split!r}]")
        assert isinstance(rows, list)
        if len(rows) != seeds or any(not isinstance(r, list) or len(r) != items for r in rows):
            raise EntryProblem(f"has predictions for {split or 'dev'} that are not {seeds} list(s) of {items} items")
        what = f"runs.predictions[{split!r}]"
        if numbers:
            values = [[_number(v, what) for v in r] for r in rows]
            decoded[split] = torch.tensor(values, dtype=torch.float32)
        else:
            decoded[split] = torch.tensor([[_count(v, what) for v in r] for r in rows], dtype=torch.int64)
    return decoded


def decode_entry(entry: object, shape: Shape, target: Target = CLASSES) -> tuple[Tuned, str]:
    """The control `entry` holds, and its digest; EntryProblem when its digest does not match its content or any
    field has the wrong type or shape for a task of `shape` predicting `target` (its headline figure in every seed
    and search candidate; numbers as outcomes where its labels are numbers)."""
    _typed(entry, dict, "its content")
    assert isinstance(entry, dict)
    control, digest = entry.get(CONTROL), entry.get(DIGEST)
    _typed(control, dict, CONTROL)
    assert isinstance(control, dict)
    try:
        matches = isinstance(digest, str) and content_digest(control) == digest
    except (TypeError, ValueError):  # a NaN or a value JSON cannot hold: never what was stored
        matches = False
    if not matches or not isinstance(digest, str):
        raise EntryProblem("does not match its digest (changed after it was stored)")
    runs = _typed(control.get("runs"), dict, "runs")
    assert isinstance(runs, dict)
    examples, seconds = _count(runs.get("examples"), "runs.examples"), _number(runs.get("seconds"), "runs.seconds")
    seed_runs = SeedRuns(
        _per_seed(runs.get("per_seed"), shape, target.headline),
        _outcomes(runs.get("correct"), shape, target.numeric_labels),  # a target of numbers scores items by numbers
        examples,
        seconds,
        _predictions(runs.get("predictions"), shape, target.numeric_labels),
    )
    pooling = _typed(control.get("pooling"), str, "pooling")
    tuned = Tuned(
        _number(control.get("lr"), "lr"),
        str(pooling),
        _count(control.get("steps"), "steps"),
        seed_runs,
        _search(control.get("search"), target.headline),
    )
    return tuned, digest
