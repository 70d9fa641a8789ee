"""Fine-tuning once per seed (`run_seeds`): each seed restores the pre-trained weights, draws the head, trains with the
training loop's pieces (AdamW and schedule from lmpt.train.optim, autocast and GradScaler from
lmpt.train.precision), then predicts and scores each split. Every random draw derives from the seed: head init, the
order of each epoch, dropout. mode=probe reads the frozen body once: its pooled features of every split, standardised
with the training split's mean and std, on which each seed trains the head (`pooled_features`). What one model
fine-tuned gives (`Tuned`: its recipe, the search that chose it and its seeds), and what it costs in examples through
the body (`seeds_work`, the progress bar's unit)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from omegaconf import OmegaConf

from lmpt.config.schema import AdamWConfig, Schedule, SchedulerConfig
from lmpt.downstream.encoding import EncodedSplit, collate
from lmpt.downstream.figures import UNLABELLED
from lmpt.errors import LmptError
from lmpt.inference.progress import WorkBar
from lmpt.rng import derive_seed, generator
from lmpt.train.optim import build_optimizer, build_scheduler
from lmpt.train.precision import Precision

if TYPE_CHECKING:
    from lmpt.downstream.classifier import SequenceClassifier
    from lmpt.downstream.seed_figures import Search
    from lmpt.downstream.target import Target

MAX_GRAD_NORM = 1.0

TRAINING_PASSES = 3
"""What training on one example costs in forward passes of the body (the forward, and a backward of about twice its
FLOPs): the progress bar's weight for a trained example, an example only read weighing one."""


@dataclass
class SeedPlan:
    """What every seed of one fine-tuning shares."""

    classifier: SequenceClassifier
    pretrained: dict[str, torch.Tensor] | None
    """The body's pre-trained weights, restored before each seed; None = probe (the body is frozen)."""
    precision: Precision
    arch: str
    special: object
    """The tokenizer's SpecialTokens (pad, bos) for batching."""
    batch_size: int
    steps: int
    lr: float
    warmup_steps: int
    weight_decay: float
    classes: list[str]
    """The task's classes in class-id order (empty for numbers to predict)."""
    target: Target
    """What the head predicts: its loss, predictions and figures."""


def steps_per_seed(n_examples: int, batch_size: int, epochs: int, max_steps: int | None) -> int:
    """Optimizer steps of one seed: `epochs` passes of ceil(n / batch_size) batches, capped by `max_steps`."""
    steps = epochs * math.ceil(n_examples / batch_size)
    return steps if max_steps is None else min(steps, max_steps)


def trained_examples(n_examples: int, batch_size: int, steps: int) -> int:
    """Examples `steps` optimizer steps train on: batches of `batch_size`, the last of each pass the remainder."""
    passes, rest = divmod(steps, math.ceil(n_examples / batch_size))
    return passes * n_examples + rest * batch_size


def seeds_work(n_train: int, n_scored: int, batch_size: int, steps: int, seeds: int, probe: bool) -> int:
    """The work of `run_seeds` in examples through the body, a trained one weighing TRAINING_PASSES: the progress
    bar's total. A probe reads the `n_train` and `n_scored` examples once (their features; its head's steps cost next
    to nothing); full fine-tuning trains each seed `steps` steps, then reads the scored examples. (Counted in
    optimizer steps, a probe's bar raced through the free head steps and stood still on the features: its time left
    jumped between seconds and minutes.)"""
    if probe:
        return n_train + n_scored
    return seeds * (TRAINING_PASSES * trained_examples(n_train, batch_size, steps) + n_scored)


def pooled_features(plan: SeedPlan, split: EncodedSplit, bar: WorkBar) -> torch.Tensor:
    """[N, d] float32 pooled representations of the frozen body (probe mode: computed once, shared by all seeds)."""
    model = plan.classifier
    model.eval()
    out = []
    with torch.inference_mode(), plan.precision.autocast():
        for start in range(0, len(split), plan.batch_size):
            indices = list(range(start, min(start + plan.batch_size, len(split))))
            batch = collate(split, indices, plan.arch, plan.special).to(plan.precision.device)
            out.append(model.pooled(batch).float())
            bar.advance(len(indices))
    return torch.cat(out)


def _pooler(plan: SeedPlan, split: EncodedSplit, features: torch.Tensor | None) -> Callable[[list[int]], torch.Tensor]:
    """indices -> pooled [b, d]: read from `features` (probe) or run the body on a batch (full)."""
    if features is not None:
        return lambda indices: features[indices]
    device = plan.precision.device
    return lambda indices: plan.classifier.pooled(collate(split, indices, plan.arch, plan.special).to(device))


def train_seed(
    plan: SeedPlan, train: EncodedSplit, features: torch.Tensor | None, seed: int, bar: WorkBar
) -> tuple[float, int, float]:
    """Fine-tune for one seed; (mean training loss over the last epoch's steps, examples trained, seconds taken)."""
    began = time.perf_counter()
    classifier, device = plan.classifier, plan.precision.device
    if plan.pretrained is not None:
        classifier.model.load_state_dict(plan.pretrained)
    torch.manual_seed(derive_seed(seed, "finetune", "head"))
    classifier.head.reset_parameters()
    trainable = classifier if plan.pretrained is not None else classifier.head
    optimizer = build_optimizer(
        OmegaConf.structured(AdamWConfig(lr=plan.lr, weight_decay=plan.weight_decay, betas=[0.9, 0.999])),
        trainable,
        device,
    )
    schedule = SchedulerConfig(name=Schedule.linear, warmup_steps=plan.warmup_steps, min_lr_ratio=0.0)
    scheduler = build_scheduler(OmegaConf.structured(schedule), optimizer, plan.steps)
    scaler = plan.precision.grad_scaler()
    pooled_of = _pooler(plan, train, features)
    classifier.train()
    if plan.pretrained is None:
        classifier.model.eval()  # a frozen body keeps its dropout off; only the head's dropout draws
    torch.manual_seed(derive_seed(seed, "finetune", "dropout"))
    losses: list[float] = []
    step = examples = epoch = 0
    while step < plan.steps:
        order = torch.randperm(len(train), generator=generator(seed, "finetune", "order", epoch)).tolist()
        for start in range(0, len(order), plan.batch_size):
            if step == plan.steps:
                break
            indices = order[start : start + plan.batch_size]
            with plan.precision.autocast():
                logits = classifier(pooled_of(indices))
            loss = plan.target.loss(logits, train.labels[indices].to(device))
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_([p for p in trainable.parameters() if p.grad is not None], MAX_GRAD_NORM)
            scaler.step(optimizer)
            scaler.update()
            scheduler.step()
            losses.append(loss.item())
            if not math.isfinite(losses[-1]):
                raise LmptError(
                    f"fine-tuning seed {seed}: the loss is not a finite number at step {step + 1} (lr={plan.lr!r}, "
                    f"weight_decay={plan.weight_decay!r}): lower lr or weight_decay; nothing was written"
                )
            step, examples = step + 1, examples + len(indices)
            if features is None:  # a probe's head step reads stored features: no body pass to count
                bar.advance(TRAINING_PASSES * len(indices))
        epoch += 1
    last_epoch = losses[-math.ceil(len(train) / plan.batch_size) :]
    return sum(last_epoch) / len(last_epoch), examples, time.perf_counter() - began


def predict(plan: SeedPlan, split: EncodedSplit, features: torch.Tensor | None, bar: WorkBar) -> torch.Tensor:
    """The prediction of every example of `split` (a class id, or a number), in order (the model in eval mode: no
    dropout); `bar` counts the examples the body reads (none when `features` are given)."""
    plan.classifier.eval()
    pooled_of = _pooler(plan, split, features)
    out = []
    with torch.inference_mode(), plan.precision.autocast():
        for start in range(0, len(split), plan.batch_size):
            indices = list(range(start, min(start + plan.batch_size, len(split))))
            out.append(plan.target.predict(plan.classifier(pooled_of(indices))).cpu())
            if features is None:
                bar.advance(len(indices))
    return torch.cat(out)


@dataclass
class SeedRuns:
    """What fine-tuning once per seed gives: the figures of each seed and, per scored split, how well each seed
    predicted each item ([seeds, items], higher better: right/wrong for classes, the negated squared error for numbers;
    in split order: what a paired bootstrap resamples)."""

    per_seed: list[dict]
    correct: dict[str, torch.Tensor]
    examples: int
    """Examples trained, over every seed."""
    seconds: float
    """Seconds spent training, over every seed."""
    predictions: dict[str, torch.Tensor] | None = None
    """Per predicted split (scored ones by prefix, and UNLABELLED), each seed's prediction of each item [seeds,
    items]: what a benchmark's files and a recomputed figure read. None when read back from a shared control."""


def run_seeds(
    plan: SeedPlan,
    splits: Mapping[str, EncodedSplit | None],
    probe: bool,
    seeds: range,
    bar: WorkBar,
    phase: str = "",
) -> SeedRuns:
    """One fine-tuning per seed, each scored. `splits`: "train", then the scored splits keyed by their figures'
    prefix ("" dev, "test_" test). `bar` shows `phase` and the seed running, and counts `seeds_work`."""
    features = {}
    if probe:  # a frozen body gives every seed the same features: compute them once
        bar.describe(f"{phase} features".lstrip())
        features = {key: pooled_features(plan, split, bar) for key, split in splits.items() if split is not None}
        mean, std = features["train"].mean(dim=0), features["train"].std(dim=0).clamp(min=1e-6)
        features = {key: (f - mean) / std for key, f in features.items()}  # standardised, as linear probes are
    per_seed, examples, seconds = [], 0, 0.0
    correct: dict[str, list[torch.Tensor]] = {}
    predictions: dict[str, list] = {}
    for i, seed in enumerate(seeds, 1):
        bar.describe(f"{phase} seed {i}/{len(seeds)}".lstrip() if len(seeds) > 1 else phase)
        train = splits["train"]
        assert train is not None, "fine-tuning has a training split"
        loss, trained, took = train_seed(plan, train, features.get("train"), seed, bar)
        examples, seconds = examples + trained, seconds + took
        figures = {"seed": seed, "train_loss": loss}
        for prefix, split in splits.items():
            if prefix != "train" and split is not None:
                predicted = predict(plan, split, features.get(prefix), bar)
                predictions.setdefault(prefix, []).append(predicted)
                if prefix == UNLABELLED:
                    continue
                figures |= plan.target.scores(split.labels, predicted, plan.classes, prefix)
                correct.setdefault(prefix, []).append(plan.target.outcomes(split.labels, predicted))
        per_seed.append(figures)
    stacked = lambda rows: {prefix: torch.stack(r) for prefix, r in rows.items()}
    return SeedRuns(per_seed, stacked(correct), examples, seconds, stacked(predictions))


@dataclass
class Tuned:
    """One model fine-tuned: the recipe it used, the search that chose it (None when fixed) and its seeds."""

    lr: float
    pooling: str
    steps: int
    """Optimizer steps of each seed."""
    runs: SeedRuns
    search: Search | None
