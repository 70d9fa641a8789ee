"""One seed of fine-tuning: restore the pre-trained weights, draw the head, train with the training loop's pieces
(AdamW and schedule from lmpt.train.optim, autocast and GradScaler from lmpt.train.precision), then predict.
Every random draw derives from the seed: head init, the order of each epoch, dropout.

A classification head on a pooled representation of a pre-trained lmpt model, one choice per architecture
(`pooling=`; auto = the first listed):

- encoder: `mean` (of the final hidden states over non-padding positions) or `first` (position 0, [CLS]);
- decoder: `last` (the last non-padding position, the closing eos: the only one that has seen the whole input);
- encoder-decoder: `encoder_mean` (mean of the encoder's final states) or `decoder_first` (the decoder's first
  step, bos, cross-attending to the encoder).

Why these defaults: an mlm encoder never trains its [CLS] position (only nsp does), so the mean of its states is the
stronger untuned feature (Reimers & Gurevych 2019 report mean pooling ahead of [CLS] for BERT); a causal decoder's
states summarise the whole text only at its end (GPT's classification recipe); Sentence-T5 (Ni et al. 2021) finds
T5's encoder mean ahead of its decoder's first step. The head is one linear layer behind dropout in both modes.

Examples as model inputs, laid out per architecture, and batches of them (right-padded to the longest row):

- encoder: `[CLS] text [SEP]` (`pair [SEP]`); segment ids 0 through the first [SEP] and 1 after, when the model
  has segment embeddings (nsp runs);
- decoder: `</s> text` (`[SEP] pair`) `</s>`: a document start as training saw it (documents are packed behind
  an eos), causal attention;
- encoder-decoder: encoder `text` (`[SEP] pair`) `</s>` (span corruption's inputs end with eos), decoder `<s>`.

Texts longer than `seq_len` are cut at the end, the longer of a pair first, so the markers always fit.

A labelled task read and checked (lmpt.downstream.sources) is tokenised for one model by `encode_task`;
`read_task` reads a task's files and does both.

What a fine-tuned task predicts (`Target`): the head's outputs, its loss, its predictions, its figures, the
per-item outcomes a paired gain resamples, its floor and its trivial baseline. Classification's (`CLASSES`: one logit
a class, cross-entropy, accuracy) is here, beside the code that fine-tunes; a task kind that predicts something else
(lmpt.downstream.kinds.regression) brings its own subclass, so fine-tuning never asks which kind it serves."""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F
from omegaconf import OmegaConf
from torch import nn

from lmpt.batch import IGNORE, Batch
from lmpt.config.schema import AdamWConfig, Schedule, SchedulerConfig
from lmpt.downstream.figures import ACCURACY, MAJORITY_ACCURACY, UNLABELLED, classification_scores
from lmpt.downstream.floors import bag_of_words_floor
from lmpt.downstream.sources import Example, FinetuneOptions, LabelledTask, labelled_name, read_labelled
from lmpt.errors import LmptError
from lmpt.inference.progress import WorkBar
from lmpt.model import LanguageModel
from lmpt.model.stacks import EncoderDecoder
from lmpt.objectives.sequences import pad_rows
from lmpt.rng import derive_seed, generator
from lmpt.rundir.trained import Trained
from lmpt.tokenizer.base import Tokenizer
from lmpt.train.optim import build_optimizer, build_scheduler
from lmpt.train.precision import Precision


class Target:
    """What a fine-tuned task predicts; subclasses answer each method. A target is stateless: the task's classes
    (empty for a task predicting numbers) come with every call that needs them."""

    numeric_labels: ClassVar[bool] = False
    """Whether the labels are read as numbers (each checked where it is read) rather than as class names."""
    headline: ClassVar[str] = ACCURACY
    """The figure the recipe search picks by (higher is better) and the table leads with."""
    gain_figure: ClassVar[str] = ACCURACY
    """The figure the gain over the untrained control is of (`gain.FIGURE`, lmpt.downstream.significance)."""
    floor_method: ClassVar[str] = "tf-idf + logistic regression"

    def outputs(self, classes: list[str]) -> int:
        """The head's width."""
        return len(classes)

    def labels(self, examples: list[Example], classes: list[str]) -> torch.Tensor:
        """The training target of each example, as the loss reads it."""
        index = {label: i for i, label in enumerate(classes)}
        return torch.tensor([index[e.label] for e in examples])

    def loss(self, outputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """The loss of float32 head outputs [B, outputs] against `labels`."""
        return F.cross_entropy(outputs, labels)

    def predict(self, outputs: torch.Tensor) -> torch.Tensor:
        """The prediction of each example from its head outputs."""
        return outputs.argmax(dim=-1)

    def scores(self, gold: torch.Tensor, predicted: torch.Tensor, classes: list[str], prefix: str = "") -> dict:
        """The figures of `predicted` against `gold`, keyed `prefix + name`."""
        return classification_scores(gold, predicted, len(classes), prefix)

    def outcomes(self, gold: torch.Tensor, predicted: torch.Tensor) -> torch.Tensor:
        """Per item, how well it was predicted, higher better (the paired gain resamples their difference)."""
        return predicted == gold

    def floor(
        self, examples: dict[str, list[Example]], classes: list[str], predictions: dict[str, list] | None = None
    ) -> dict:
        """The bag-of-words floor's figures on dev (and test), keyed as the fine-tuning's; `predictions`, when
        given, receives its predictions by split prefix ("" dev, "test_" test)."""
        return bag_of_words_floor(examples, classes, predictions)

    def baseline(self, examples: dict[str, list[Example]], dev_labels: torch.Tensor, classes: list[str]) -> dict:
        """The trivial baseline's figures on dev: answering the training split's most common class."""
        majority = Counter(e.label for e in examples["train"]).most_common(1)[0][0]
        return {MAJORITY_ACCURACY: float((dev_labels == classes.index(majority)).float().mean())}

    def as_written(self, prediction: float, classes: list[str]) -> str:
        """A prediction as the task's files write a label."""
        return classes[int(prediction)]


CLASSES = Target()
"""Classification's target: one logit a class, cross-entropy, accuracy."""


@dataclass
class EncodedSplit:
    """A split tokenised: one id row (and segment row, when used) per example, and the label of each (a class id,
    or a number to predict)."""

    rows: list[torch.Tensor]
    segments: list[torch.Tensor] | None
    labels: torch.Tensor

    def __len__(self) -> int:
        return len(self.rows)

    def subset(self, indices: list[int]) -> EncodedSplit:
        """The examples at `indices`, in that order (the same row tensors, not copies)."""
        segments = None if self.segments is None else [self.segments[i] for i in indices]
        return EncodedSplit([self.rows[i] for i in indices], segments, self.labels[indices])


def fit_pair(text: list[int], pair: list[int] | None, room: int) -> tuple[list[int], list[int] | None]:
    """Cut the longer of the two (the text alone, without a pair) one token at a time until both fit `room`."""
    text, pair = list(text), None if pair is None else list(pair)
    while len(text) + (len(pair) if pair is not None else 0) > room:
        if pair is not None and len(pair) > len(text):
            pair.pop()
        else:
            text.pop()
    return text, pair


def encode_split(
    examples: list[Example],
    labels: dict[str, int] | torch.Tensor,
    tokenizer: Tokenizer,
    arch: str,
    seq_len: int,
    segments: bool,
) -> EncodedSplit:
    """The examples laid out for `arch` (see the module's table), at most `seq_len` tokens each, with their labels:
    a class id each by `labels` (label as written -> id), or `labels` itself (one a row, as the task's target reads
    them: a regression's numbers)."""
    if isinstance(labels, dict):
        labels = torch.tensor([labels[e.label] for e in examples])
    sp = tokenizer.special
    texts = tokenizer.encode_batch([e.text for e in examples])
    pairs = tokenizer.encode_batch([e.pair or "" for e in examples]) if examples[0].pair is not None else None
    markers = {"encoder": 2, "decoder": 2, "encoder-decoder": 1}[arch] + (pairs is not None)
    rows, segment_rows = [], []
    for i, ids in enumerate(texts):
        text, pair = fit_pair(ids, pairs[i] if pairs is not None else None, seq_len - markers)
        tail = [] if pair is None else [sp.sep, *pair]
        if arch == "encoder":
            first = [sp.cls, *text, sp.sep]
            second = [] if pair is None else [*pair, sp.sep]
            row = first + second
            segment_rows.append(torch.tensor([0] * len(first) + [1] * len(second)))
        elif arch == "decoder":
            row = [sp.eos, *text, *tail, sp.eos]
        else:
            row = [*text, *tail, sp.eos]
        rows.append(torch.tensor(row))
    return EncodedSplit(rows, segment_rows if segments and arch == "encoder" else None, labels)


def collate(split: EncodedSplit, indices: list[int], arch: str, special) -> Batch:
    """The examples at `indices` as one Batch, right-padded with pad to the longest row."""
    rows = [split.rows[i] for i in indices]
    length = max(r.numel() for r in rows)
    ids = pad_rows(rows, length, special.pad)
    segment_ids = None if split.segments is None else pad_rows([split.segments[i] for i in indices], length, 0)
    decoder_ids = torch.full((len(rows), 1), special.bos) if arch == "encoder-decoder" else None
    attention = "causal" if arch == "decoder" else "bidirectional"
    no_labels = torch.full((len(rows), 1), IGNORE)  # the classifier reads hidden states, never the LM head
    return Batch(ids, no_labels, attention, decoder_input_ids=decoder_ids, segment_ids=segment_ids)


@dataclass
class EncodedTask:
    """A task read, checked and tokenised: its classes (label as written, in class-id order; none for numbers to
    predict), splits and target."""

    name: str
    classes: list[str]
    train: EncodedSplit
    dev: EncodedSplit
    test: EncodedSplit | None
    examples: dict[str, list[Example]]
    """The examples as read, by split ("train", "dev", "test"): what the bag-of-words floor reads."""
    target: Target = CLASSES
    """What the task predicts: the head, loss, figures and floor (lmpt.downstream.training)."""
    unlabelled: EncodedSplit | None = None
    """Examples only predicted, never scored (a benchmark's test split whose labels are withheld)."""


def encode_task(
    trained: Trained,
    labelled: LabelledTask,
    seq_len: int,
    target: Target = CLASSES,
) -> EncodedTask:
    """`labelled` tokenised for the model, at most `seq_len` tokens an example, its labels as `target` reads them,
    and its unlabelled examples, to predict only (their labels are never read)."""
    unlabelled = labelled.unlabelled_examples()
    segments = trained.model.body.embed.segments is not None

    def encode(examples: list[Example], labels: torch.Tensor) -> EncodedSplit:
        return encode_split(examples, labels, trained.tokenizer, trained.arch, seq_len, segments)

    def labelled_split(split: str) -> EncodedSplit:
        examples = labelled.examples[split]
        return encode(examples, target.labels(examples, labelled.classes))

    test = labelled_split("test") if "test" in labelled.examples else None
    unlabelled_split = encode(unlabelled, torch.zeros(len(unlabelled))) if unlabelled else None
    return EncodedTask(
        labelled.name,
        labelled.classes,
        labelled_split("train"),
        labelled_split("dev"),
        test,
        labelled.examples,
        target,
        unlabelled_split,
    )


def read_task(trained: Trained, o: FinetuneOptions, seq_len: int) -> EncodedTask:
    """Every split of `o.data`'s files read (lmpt.downstream.sources.read_labelled) and tokenised for the model
    (`encode_task`)."""
    return encode_task(trained, read_labelled(o.data, labelled_name(o)), seq_len)


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
    target: Target = CLASSES
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


POOLINGS = {"encoder": ("mean", "first"), "decoder": ("last",), "encoder-decoder": ("encoder_mean", "decoder_first")}
"""Poolings each architecture offers; the first is the default (pooling=auto)."""


def resolve_pooling(arch: str, pooling: str) -> str:
    """`pooling` checked against `arch` (auto = the architecture's default)."""
    if pooling == "auto":
        return POOLINGS[arch][0]
    if pooling not in POOLINGS[arch]:
        raise LmptError(f"pooling={pooling} does not fit a {arch}: use auto or one of {', '.join(POOLINGS[arch])}")
    return pooling


class SequenceClassifier(nn.Module):
    """A pre-trained LanguageModel, a pooling of its hidden states and a linear head over `n_classes`."""

    def __init__(self, model: LanguageModel, pooling: str, n_classes: int, dropout: float) -> None:
        super().__init__()
        self.model = model
        self.pooling = pooling
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(model.d_model, n_classes)

    def pooled(self, batch: Batch) -> torch.Tensor:
        """[B, d] representation of each example, read as the module docstring's table says."""
        keep = (batch.input_ids != self.model.pad_id).unsqueeze(-1)
        if self.pooling == "encoder_mean":
            assert isinstance(self.model.body, EncoderDecoder), "encoder_mean pools an encoder-decoder's encoder"
            states = self.model.body.encode(batch.input_ids, batch.segment_ids)
        else:
            states = self.model.hidden_states(batch)
        if self.pooling in ("first", "decoder_first"):
            return states[:, 0]
        if self.pooling == "last":
            last = keep.squeeze(-1).sum(dim=1) - 1
            return states[torch.arange(states.shape[0], device=states.device), last]
        return (states * keep).sum(dim=1) / keep.sum(dim=1).clamp(min=1)

    def forward(self, pooled: torch.Tensor) -> torch.Tensor:
        """Float32 class logits [B, n_classes] of pooled representations."""
        return self.head(self.dropout(pooled)).float()

    def compile_body(self) -> None:
        """torch.compile the model as training does (LanguageModel.compile_parts); encoder_mean runs only the
        encoder stack, so that stack is compiled as well."""
        self.model.compile_parts()
        if self.pooling == "encoder_mean":
            self.model.body.encoder.compile()  # type: ignore[union-attr]
