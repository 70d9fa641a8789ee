"""A labelled task read and checked (lmpt.downstream.tasks.labelled_task) and tokenised for one model
(`encode_task`, laid out per architecture by lmpt.downstream.finetuning.encoding; `read_task` does both)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from lmpt.downstream.finetuning.encoding import EncodedSplit, encode_split
from lmpt.downstream.tasks.labelled_task import LabelledTask, read_labelled
from lmpt.downstream.tasks.options import FinetuneOptions
from lmpt.downstream.tasks.task_files import Example
from lmpt.rundir.trained import Trained


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
    examples: dict[str, list[Example]]
    """The examples as read, by split ("train", "dev", "test"): what the bag-of-words floor reads."""


def encode_task(trained: Trained, labelled: LabelledTask, seq_len: int) -> Task:
    """`labelled` tokenised for the model, at most `seq_len` tokens an example."""
    index = {label: i for i, label in enumerate(labelled.classes)}
    segments = trained.model.body.embed.segments is not None

    def encode(split: str) -> EncodedSplit:
        return encode_split(labelled.examples[split], index, trained.tokenizer, trained.arch, seq_len, segments)

    majority = Counter(e.label for e in labelled.examples["train"]).most_common(1)[0][0]
    test = encode("test") if "test" in labelled.examples else None
    return Task(labelled.name, labelled.classes, encode("train"), encode("dev"), test, majority, labelled.examples)


def read_task(trained: Trained, o: FinetuneOptions, seq_len: int) -> Task:
    """Every split read, its labels checked against the training labels (`read_labelled`), and tokenised for the
    model (`encode_task`)."""
    return encode_task(trained, read_labelled(o), seq_len)
