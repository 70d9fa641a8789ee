"""`finetune(trained, options) -> FineTuning`: fine-tune a pre-trained run on a labelled task once per seed and score
each run on dev (and test): its kind's figures (classification's accuracy, macro-F1 and, for two classes, Matthews
correlation; a regression's correlations and MSE) and the task's own metrics with its score (a GLUE task's official
ones: lmpt.downstream.official), each as mean and sample standard deviation over seeds with the per-seed figures, and
its unlabelled examples predicted. The recipe is searched on a slice of the training split (lr=search,
lmpt.downstream.recipe) unless fixed. With control=scratch the same architecture freshly initialised
(lmpt.downstream.control) goes through the same search, seeds and data (or is read back from the shared cache,
lmpt.downstream.control_cache), a bag-of-words floor is fit, and the gain over the control carries a 95% interval
paired over (seed, item) (lmpt.downstream.significance). Every input is read and checked before any training, so a bad
task file costs nothing and writes nothing (`check_task`). mode=probe trains the head on the frozen body's features
(lmpt.downstream.seeds). A task's `score` turns the fine-tuning into its record (lmpt.downstream.kinds
.fine_tuned_result).

`tune` fine-tunes one model on a task: it searches the recipe when asked, then trains and scores the model once per
seed with the recipe chosen. The run's model and its scratch control each go through it, so they get the same search,
seeds and data."""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any

from lmpt.config.command_options import require
from lmpt.config.schema import CONTROLS, FINETUNE_MODES, TrainerConfig
from lmpt.downstream.classifier import SequenceClassifier
from lmpt.downstream.control import scratch_model
from lmpt.downstream.control_cache import control_key, read_control, store_control
from lmpt.downstream.encoding import EncodedTask, encode_task
from lmpt.downstream.figures import (
    ACCURACY,
    BAG_OF_WORDS,
    SCRATCH,
    UNLABELLED,
    mean_and_std,
    mean_of,
)
from lmpt.downstream.labelled import LabelledTask, capped, check_trainable, read_labelled
from lmpt.downstream.official import SCORED_SPLITS, TaskMetric, official_figures
from lmpt.downstream.options import FinetuneOptions, labelled_name
from lmpt.downstream.recipe import (
    SEARCH,
    RecipeSpace,
    check_recipe_settings,
    check_search_size,
    parse_lr,
    recipe_space,
    search_recipe,
    search_work,
)
from lmpt.downstream.seeds import SeedPlan, Tuned, run_seeds, seeds_work, steps_per_seed
from lmpt.downstream.significance import Gain, paired_gain
from lmpt.downstream.target import CLASSES, Target
from lmpt.inference.progress import WorkBar
from lmpt.model import LanguageModel
from lmpt.rundir.trained import Trained
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


def tuning_work(task: EncodedTask, o: FinetuneOptions, space: RecipeSpace) -> int:
    """One model's fine-tuning, search included, in examples through the body (`seeds_work`): the progress
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
