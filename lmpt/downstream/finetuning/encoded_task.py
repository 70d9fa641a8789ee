"""A labelled task read and checked (lmpt.downstream.tasks.labelled_task) and tokenised for one model
(`encode_task`, laid out per architecture by lmpt.downstream.finetuning.encoding; `read_task` does both)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from lmpt.downstream.finetuning.encoding import EncodedSplit, encode_split
from lmpt.downstream.finetuning.targets import CLASSES, Target
from lmpt.downstream.tasks.labelled_task import LabelledTask, read_labelled
from lmpt.downstream.tasks.options import FinetuneOptions
from lmpt.downstream.tasks.task_files import Example
from lmpt.rundir.trained import Trained


@dataclass
class Task:
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
    """What the task predicts: the head, loss, figures and floor (lmpt.downstream.finetuning.targets)."""
    unlabelled: EncodedSplit | None = None
    """Examples only predicted, never scored (a benchmark's test split whose labels are withheld)."""


def encode_task(
    trained: Trained,
    labelled: LabelledTask,
    seq_len: int,
    target: Target = CLASSES,
    unlabelled: list[Example] | None = None,
) -> Task:
    """`labelled` tokenised for the model, at most `seq_len` tokens an example, its labels as `target` reads them;
    `unlabelled`: examples to predict only (their labels are never read)."""
    segments = trained.model.body.embed.segments is not None

    def encode(examples: list[Example], labels: torch.Tensor) -> EncodedSplit:
        return encode_split(examples, labels, trained.tokenizer, trained.arch, seq_len, segments)

    def labelled_split(split: str) -> EncodedSplit:
        examples = labelled.examples[split]
        return encode(examples, target.labels(examples, labelled.classes))

    test = labelled_split("test") if "test" in labelled.examples else None
    unlabelled_split = encode(unlabelled, torch.zeros(len(unlabelled))) if unlabelled else None
    return Task(
        labelled.name,
        labelled.classes,
        labelled_split("train"),
        labelled_split("dev"),
        test,
        labelled.examples,
        target,
        unlabelled_split,
    )


def read_task(trained: Trained, o: FinetuneOptions, seq_len: int) -> Task:
    """Every split read, its labels checked against the training labels (`read_labelled`), and tokenised for the
    model (`encode_task`)."""
    return encode_task(trained, read_labelled(o), seq_len)
