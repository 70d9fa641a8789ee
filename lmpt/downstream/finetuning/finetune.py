"""`finetune(trained, options) -> dict`: fine-tune a pre-trained run on a labelled task once per seed and score each run
on dev (and test): accuracy, macro-F1 and, for two classes, Matthews correlation, each as mean and sample standard
deviation over seeds with the per-seed figures. The recipe is searched on a slice of the training split (lr=search,
lmpt.downstream.finetuning.recipe_search) unless fixed. With control=scratch the same architecture freshly initialised
(lmpt.downstream.control) goes through the same search, seeds and data, a bag-of-words floor is fit, and the gain over
the control carries a 95% interval paired over (seed, item) (lmpt.downstream.significance). A GLUE task (read from
data.dir) adds its official figures and score to every seed's and the floor's (lmpt.downstream.tasks.glue), so a run's
GLUE entry records and ranks by them as `task=glue` does. Every input is read and checked before any training, so a bad
task file costs nothing and writes nothing. mode=probe computes the frozen body's pooled features once, standardises
them with the training split's mean and std, and trains the head on them. `lmpt-finetune` keeps the result as a hand
run's record (lmpt.downstream.finetune_cli)."""

from __future__ import annotations

import copy
import math

from lmpt.config.command_options import require
from lmpt.config.schema import CONTROLS, FINETUNE_MODES, TrainerConfig
from lmpt.downstream.control import scratch_model
from lmpt.downstream.figures import (
    ACCURACY,
    BAG_OF_WORDS,
    GAIN,
    GLUE_METRICS,
    SCRATCH,
    mean_and_std,
    mean_of,
)
from lmpt.downstream.finetuning.encoding import Task, encode_task
from lmpt.downstream.finetuning.recipe_search import (
    SEARCH,
    Tuned,
    check_recipe_settings,
    check_search_size,
    parse_lr,
    recipe_space,
    tune,
    tuning_work,
)
from lmpt.downstream.finetuning.shared_control import control_key, read_control, store_control
from lmpt.downstream.finetuning.targets import CLASSES, Target
from lmpt.downstream.significance import paired_gain
from lmpt.downstream.tasks.glue import SPLIT_PREFIXES, GlueTask, glue_task, official_figures
from lmpt.downstream.tasks.labelled_task import LabelledTask, capped, check_trainable, read_labelled
from lmpt.downstream.tasks.options import FinetuneOptions
from lmpt.downstream.tasks.task_files import Example
from lmpt.inference.progress import WorkBar
from lmpt.rundir.trained import Trained
from lmpt.train.precision import pick_precision


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
    labelled = capped(labelled or read_labelled(o, target.numeric_labels), o.max_train_examples, o.seed)
    check_trainable(labelled, o)
    if parse_lr(o.lr) == SEARCH:
        check_search_size(len(labelled.examples["train"]), o)
    return seq_len, labelled


def finetune(
    trained: Trained,
    o: FinetuneOptions,
    target: Target = CLASSES,
    labelled: LabelledTask | None = None,
    unlabelled: list[Example] | None = None,
    keep: list[dict] | None = None,
) -> dict:
    """Fine-tune `trained` (left unchanged) on the task `o.data` names (or `labelled`, read already), predicting
    `target`, `o.seeds` times, and with control=scratch its freshly initialised twin beside it; the figures as a dict
    (what `lmpt-finetune json=true` prints). `unlabelled`: examples to predict too, never scored. `keep`, when given,
    receives the predictions by model ("pretrained", "scratch") and split. Bad input raises LmptError before any
    training."""
    space = recipe_space(trained.arch, o)  # a pooling that does not fit the architecture: refused first
    seq_len, labelled = check_task(o, trained.model.max_seq_len, int(trained.config.data.seq_len), target, labelled)
    task = encode_task(trained, labelled, seq_len, target, unlabelled)
    device = trained.model.head_weight.device
    precision = pick_precision(TrainerConfig(precision=o.precision, amp=o.amp), device)
    bodies = {"pretrained": trained.model if o.mode == "probe" else copy.deepcopy(trained.model)}  # probe only reads
    glue = glue_task(o.task or "", "task") if o.data.dir is not None else None  # a GLUE task: its official figures
    floor, key, shared = None, None, None
    if o.control == SCRATCH:
        scratch = scratch_model(trained)
        key = control_key(
            scratch, task, o, space, precision.name, trained.tokenizer.special, trained.arch, glue is not None
        )
        shape = {p: (o.seeds, len(s)) for p, s in (("", task.dev), ("test_", task.test)) if s is not None}
        # the same control fine-tuned for another run (objective, budget); its entry keeps no predictions
        shared = read_control(key, shape, target, o.json) if keep is None else None
        if shared is None:
            bodies[SCRATCH] = scratch
        floor_predictions: dict[str, list] = {}
        floor = target.floor(task.examples, task.classes, floor_predictions)  # cheap; any failure before training
    doing = f"{task.name} {'probe' if o.mode == 'probe' else 'fine-tune'}"
    labels = {"pretrained": doing, SCRATCH: f"{doing} (scratch control)"}
    with WorkBar(doing, hidden=o.json, unit="example passes") as bar:
        bar.start(len(bodies) * tuning_work(task, o, space))
        tuned = {
            name: tune(body, task, o, space, precision, trained.tokenizer.special, trained.arch, bar, labels[name])
            for name, body in bodies.items()
        }
    if glue is not None:  # before a control is stored: one read back carries them too
        for t in tuned.values():
            _add_official(glue, task, t)
        if floor is not None:
            floor |= official_figures(glue, task.examples, floor_predictions, task.classes)
    if keep is not None:
        keep.append({name: t.runs.predictions for name, t in tuned.items()})
        if floor is not None:
            keep[-1][BAG_OF_WORDS] = floor_predictions
    result = _figures(trained, o, task, seq_len, precision.name, tuned["pretrained"])
    if glue is not None:
        result[GLUE_METRICS] = list(glue.metrics)
    if floor is not None and key is not None:
        if shared is None:  # fine-tuned here: kept for the next run with the same control, where the cache may
            stored = store_control(key, tuned[SCRATCH])
        control, entry = shared or (tuned[SCRATCH], stored)
        result |= _control_figures(
            tuned["pretrained"], control, floor, int(trained.config.trainer.seed), target.gain_figure
        )
        result[SCRATCH] |= {"key": key, "shared": shared is not None, "entry_digest": entry}
    return result


def _add_official(glue: GlueTask, task: Task, tuned: Tuned) -> None:
    """Each seed's official figures of the GLUE task and its score, from the seed's predictions, into its figures."""
    predictions = tuned.runs.predictions or {}
    for i, row in enumerate(tuned.runs.per_seed):
        predicted = {p: predictions[p][i].tolist() for p in SPLIT_PREFIXES if p in predictions}
        row |= official_figures(glue, task.examples, predicted, task.classes)


def _figures(trained: Trained, o: FinetuneOptions, task: Task, seq_len: int, precision: str, tuned: Tuned) -> dict:
    runs = tuned.runs
    return {
        "task": task.name,
        "objective": trained.objective_name,
        "arch": trained.arch,
        "weights": str(trained.weights),
        "mode": o.mode,
        "pooling": tuned.pooling,
        "seeds": o.seeds,
        "classes": task.classes,
        "train_examples": len(task.train),
        **({"max_train_examples": o.max_train_examples} if o.max_train_examples is not None else {}),
        "dev_examples": len(task.dev),
        **({"test_examples": len(task.test)} if task.test is not None else {}),
        **task.target.baseline(task.examples, task.dev.labels, task.classes),
        "epochs": o.epochs,
        "steps": tuned.steps,
        "lr": tuned.lr,
        "batch_size": o.batch_size,
        "seq_len": seq_len,
        "precision": precision,
        **mean_and_std(runs.per_seed),
        "per_seed": runs.per_seed,
        "examples_per_s": runs.examples / runs.seconds if runs.seconds > 0 else None,
        **({"search": tuned.search} if tuned.search is not None else {}),
    }


def _control_figures(pretrained: Tuned, control: Tuned, floor: dict, init_seed: int, figure: str = ACCURACY) -> dict:
    """The control's figures, the bag-of-words floor and the gain of `figure` (dev and test) with its paired
    interval, from the per-item outcomes (higher better) of both."""
    scratch = {
        "init_seed": init_seed,
        "lr": control.lr,
        "pooling": control.pooling,
        "steps": control.steps,
        **mean_and_std(control.runs.per_seed),
        "per_seed": control.runs.per_seed,
        **({"search": control.search} if control.search is not None else {}),
    }
    gains = {}
    for prefix, correct in pretrained.runs.correct.items():
        gain = paired_gain(correct.numpy(), control.runs.correct[prefix].numpy())
        key = prefix + figure
        gains[key] = {"pretrained": seed_mean(pretrained, key), SCRATCH: seed_mean(control, key), **gain}
    return {"control": SCRATCH, SCRATCH: scratch, BAG_OF_WORDS: floor, GAIN: gains}


def seed_mean(tuned: Tuned, figure: str) -> float:
    """The mean over seeds of `figure` of one tuned model."""
    return mean_and_std(tuned.runs.per_seed)[mean_of(figure)]
