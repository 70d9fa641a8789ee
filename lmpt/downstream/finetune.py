"""`finetune(trained, options) -> dict`: fine-tune a pre-trained run on a labelled task once per seed and score
each run on dev (and test): accuracy, macro-F1 and, for two classes, Matthews correlation, each as mean and sample
standard deviation over seeds with the per-seed figures. Every input is read and checked before any training, so a
bad task file costs nothing and writes nothing. mode=probe computes the frozen body's pooled features once,
standardises them with the training split's mean and std, and trains the head on them. `finetune_run(RUN,
options)` also keeps the record RUN/downstream/TASK.json (what `lmpt-finetune` does)."""

from __future__ import annotations

import copy
import math
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from omegaconf import OmegaConf

from lmpt.config.choices import FINETUNE_MODES
from lmpt.config.command_options import require
from lmpt.downstream.classifier import SequenceClassifier, resolve_pooling
from lmpt.downstream.encoding import EncodedSplit, encode_split
from lmpt.downstream.options import FinetuneOptions
from lmpt.downstream.record import record_path, write_record
from lmpt.downstream.scores import classification_scores, mean_and_std
from lmpt.downstream.task_files import Example, read_examples
from lmpt.downstream.training import SeedPlan, pooled_features, predict, steps_per_seed, train_seed
from lmpt.errors import LmptError
from lmpt.inference.progress import WorkBar
from lmpt.rundir.trained import Trained, load_trained, locate_weights
from lmpt.train.precision import pick_precision

DEFAULT_LR = {"full": 1e-4, "probe": 1e-2}


@dataclass
class Task:
    """A task read, checked and tokenised: its classes (label as written, in class-id order) and splits."""

    name: str
    classes: list[str]
    train: EncodedSplit
    dev: EncodedSplit
    test: EncodedSplit | None
    majority: str
    """The most common training label: predicting it for every dev example is the baseline to beat."""


def task_name(options: FinetuneOptions) -> str:
    """`task=`, else the train file's name without its suffixes (its folder's when the file is train.*)."""
    if options.task:
        return options.task
    path = Path(options.data.train)
    stem = path.name.split(".")[0]
    return path.resolve().parent.name if stem.lower() in ("train", "training") else stem


def _is_integer(label: str) -> bool:
    return re.fullmatch(r"-?\d+", label) is not None


def label_order(labels: list[str]) -> list[str]:
    """Distinct labels, integers in numeric order first, then strings in sorted order: class i is the i-th.
    Integers compare by sign, length and digits, so one of any length never meets int()'s digit limit."""

    def key(label: str) -> tuple:
        if not _is_integer(label):
            return (1, 0, 0, label, "")
        digits = label.lstrip("-").lstrip("0") or "0"
        sign = -1 if label.startswith("-") and digits != "0" else 1
        return (0, sign, sign * len(digits), digits if sign > 0 else "".join(chr(201 - ord(c)) for c in digits), label)

    return sorted(set(labels), key=key)


def check_labels_agree(examples: list[Example], path: str) -> None:
    """Refuse true/false labels beside integer ones: `1` and `true` would silently be two classes."""
    labels = {e.label for e in examples}
    booleans = sorted(labels & {"true", "false", "True", "False", "TRUE", "FALSE"})
    integers = sorted(label for label in labels if _is_integer(label))
    if booleans and integers:
        raise LmptError(
            f"data.train={path} mixes true/false labels with integer labels ({', '.join(booleans + integers[:4])}), "
            "which would be separate classes: write every label the same way"
        )


def _check_labels(examples: list[Example], classes: list[str], role: str, path: str) -> None:
    unseen = sorted({e.label for e in examples} - set(classes))
    if unseen:
        raise LmptError(
            f"data.{role}={path} has label(s) {', '.join(map(repr, unseen[:5]))} never seen in training (training "
            f"labels: {', '.join(map(repr, classes))}): check data.label_field or the split"
        )


def read_task(trained: Trained, o: FinetuneOptions, seq_len: int) -> Task:
    """Every split read, its labels checked against the training labels, and tokenised for the model."""
    data = o.data
    train = read_examples(data.train, "train", data)
    check_labels_agree(train, data.train)
    classes = label_order([e.label for e in train])
    if len(classes) < 2:
        raise LmptError(
            f"data.train={data.train} has only one class ({classes[0]!r} in field '{data.label_field}'): a "
            "classifier needs examples of at least two classes"
        )
    splits = {"dev": read_examples(data.dev, "dev", data)}
    if data.test is not None:
        splits["test"] = read_examples(data.test, "test", data)
    for role, examples in splits.items():
        _check_labels(examples, classes, role, getattr(data, role))
    index = {label: i for i, label in enumerate(classes)}
    segments = trained.model.body.embed.segments is not None

    def encode(examples: list[Example]) -> EncodedSplit:
        return encode_split(examples, index, trained.tokenizer, trained.arch, seq_len, segments)

    majority = Counter(e.label for e in train).most_common(1)[0][0]
    test = encode(splits["test"]) if "test" in splits else None
    return Task(task_name(o), classes, encode(train), encode(splits["dev"]), test, majority)


def check_settings(o: FinetuneOptions) -> None:
    """The options that need no model, checked at start-up: every number finite and in range."""
    for key in ("lr", "warmup", "weight_decay", "dropout"):
        value = getattr(o, key)
        require(value is None or math.isfinite(value), f"{key}={value} must be a finite number")
    require(o.mode in FINETUNE_MODES, f"mode={o.mode} is unknown: use {' or '.join(FINETUNE_MODES)}")
    require(o.seeds >= 1, f"seeds={o.seeds} must be at least 1")
    require(o.epochs >= 1, f"epochs={o.epochs} must be at least 1")
    require(o.max_steps is None or o.max_steps >= 1, f"max_steps={o.max_steps} must be at least 1 (or null)")
    require(o.batch_size >= 1, f"batch_size={o.batch_size} must be at least 1")
    require(o.lr is None or o.lr > 0, f"lr={o.lr} must be positive")
    require(0 <= o.warmup < 1, f"warmup={o.warmup} must be in [0, 1)")
    require(0 <= o.dropout < 1, f"dropout={o.dropout} must be in [0, 1)")
    require(o.weight_decay >= 0, f"weight_decay={o.weight_decay} must be at least 0")
    require(
        o.precision in (None, "fp32", "bf16", "fp16"), f"precision={o.precision} is unknown: use fp32, bf16 or fp16"
    )


def _check_options(o: FinetuneOptions, max_seq_len: int, seq_len: int) -> None:
    check_settings(o)
    require(8 <= seq_len <= max_seq_len, f"seq_len={seq_len} must be in [8, {max_seq_len}] (the model's max_seq_len)")


def finetune(trained: Trained, o: FinetuneOptions) -> dict:
    """Fine-tune `trained` (left unchanged) on the task `o.data` names, `o.seeds` times; the figures as a dict
    (what `lmpt-finetune json=true` prints). Bad input raises LmptError before any training."""
    seq_len = min(o.seq_len or int(trained.config.data.seq_len), trained.model.max_seq_len)
    _check_options(o, trained.model.max_seq_len, o.seq_len or seq_len)
    pooling = resolve_pooling(trained.arch, o.pooling)
    task = read_task(trained, o, seq_len)
    device = trained.model.head_weight.device
    precision = pick_precision(OmegaConf.create({"precision": o.precision, "amp": o.amp}), device)
    probe = o.mode == "probe"
    body = trained.model if probe else copy.deepcopy(trained.model)  # probe only reads the body
    classifier = SequenceClassifier(body, pooling, len(task.classes), o.dropout).to(device)
    if o.compile:
        classifier.compile_body()
    steps = steps_per_seed(len(task.train), o.batch_size, o.epochs, o.max_steps)
    plan = SeedPlan(
        classifier, None if probe else {k: v.clone() for k, v in trained.model.state_dict().items()}, precision,
        trained.arch, trained.tokenizer.special, o.batch_size, steps, o.lr or DEFAULT_LR[o.mode],
        round(o.warmup * steps), o.weight_decay,
    )  # fmt: skip
    splits = {"train": task.train, "": task.dev, "test_": task.test}
    with WorkBar("fine-tuning (seeds x steps)", hidden=o.json) as bar:
        bar.start(o.seeds * steps)
        per_seed, examples, seconds = _run_seeds(plan, splits, probe, range(o.seed, o.seed + o.seeds), bar)
    majority = task.classes.index(task.majority)
    return {
        "task": task.name,
        "objective": trained.objective_name,
        "arch": trained.arch,
        "weights": str(trained.weights),
        "mode": o.mode,
        "pooling": pooling,
        "seeds": o.seeds,
        "classes": task.classes,
        "train_examples": len(task.train),
        "dev_examples": len(task.dev),
        **({"test_examples": len(task.test)} if task.test is not None else {}),
        "majority_accuracy": float((task.dev.labels == majority).float().mean()),
        "epochs": o.epochs,
        "steps": steps,
        "lr": plan.lr,
        "batch_size": o.batch_size,
        "seq_len": seq_len,
        "precision": precision.name,
        **mean_and_std(per_seed),
        "per_seed": per_seed,
        "examples_per_s": examples / seconds if seconds > 0 else None,
    }


def _run_seeds(
    plan: SeedPlan, splits: dict[str, EncodedSplit | None], probe: bool, seeds: range, bar: WorkBar
) -> tuple[list[dict], int, float]:
    """(per-seed figures, examples trained, seconds training) of one fine-tuning per seed. `splits`: "train", then
    the scored splits keyed by their figures' prefix ("" dev, "test_" test)."""
    n_classes = plan.classifier.head.out_features
    features = {}
    if probe:  # a frozen body gives every seed the same features: compute them once
        features = {key: pooled_features(plan, split) for key, split in splits.items() if split is not None}
        mean, std = features["train"].mean(dim=0), features["train"].std(dim=0).clamp(min=1e-6)
        features = {key: (f - mean) / std for key, f in features.items()}  # standardised, as linear probes are
    per_seed, examples, seconds = [], 0, 0.0
    for seed in seeds:
        loss, trained, took = train_seed(plan, splits["train"], features.get("train"), seed, bar)
        examples, seconds = examples + trained, seconds + took
        figures = {"seed": seed, "train_loss": loss}
        for prefix, split in splits.items():
            if prefix != "train" and split is not None:
                predicted = predict(plan, split, features.get(prefix))
                figures |= classification_scores(split.labels, predicted, n_classes, prefix)
        per_seed.append(figures)
    return per_seed, examples, seconds


def finetune_run(run: str | Path, o: FinetuneOptions) -> dict:
    """Load RUN (a run directory or checkpoint), fine-tune it (`finetune`) and keep the figures in
    RUN/downstream/TASK.json (the run directory a checkpoint belongs to); the dict, with `record` its path."""
    check_settings(o)
    run_dir = locate_weights(run).run_dir
    named_by = None if o.task else f"data.train={o.data.train}"
    path = record_path(run_dir, task_name(o), named_by)  # a bad task name is refused before any work
    result = finetune(load_trained(run, o.device), o)
    write_record(path, {**result, "record": str(path)})
    return {**result, "record": str(path)}
