"""A labelled task read and checked (`LabelledTask`), before any model is needed (tokenised for one by
lmpt.downstream.encoding.encode_task): every split's labels checked against the training labels, classes in a fixed
order (`label_order`), a training split with nothing to learn refused (`check_trainable`), its training examples
capped (`capped`); it carries the metrics it is scored by (lmpt.downstream.official) and the files it only predicts
(`Unlabelled`). Its examples come from a source (`ExampleSource`): lmpt-finetune's data.* files (`LabelledFiles`,
`read_labelled`) or a benchmark's folder (lmpt.downstream.glue_files.GlueSource)."""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from lmpt.data.readers.jsonl import jsonl_records
from lmpt.downstream.labelled_files import read_examples
from lmpt.errors import LmptError

if TYPE_CHECKING:
    from lmpt.downstream.labelled_files import Example, TaskData
    from lmpt.downstream.official import TaskMetric
    from lmpt.downstream.options import FinetuneOptions


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


@dataclass(frozen=True)
class Unlabelled:
    """A file of examples only predicted, never scored (a benchmark's test split, its labels withheld): its name,
    each row's index as the file gives it, and the examples."""

    name: str
    indices: list[str]
    examples: list[Example]


@dataclass(frozen=True)
class LabelledTask:
    """A task's splits read and their labels checked, before any tokenizer is needed (what `lmpt` checks at
    start-up, lmpt.downstream.run_tasks.check_downstream), with what it is scored by and what it only predicts."""

    name: str
    classes: list[str]
    """The training labels as written, in class-id order (`label_order`); empty for a task whose labels are numbers
    to predict (regression)."""
    examples: dict[str, list[Example]]
    """The examples by split: "train", "dev" and, when given, "test"."""
    metrics: tuple[TaskMetric, ...] = ()
    """The task's own metrics (a benchmark's official ones: lmpt.downstream.official), computed the same way for
    every task that has them; none: its kind's figures alone (classification's accuracy, macro-F1 and MCC,
    regression's correlations and MSE)."""
    unlabelled: tuple[Unlabelled, ...] = ()
    """Files of examples only predicted (a benchmark's test files)."""
    named: dict[str, str] = field(default_factory=dict)
    """How messages name each split's source (`data.train=FILE`, `data.dir=DIR (RTE, dev)`): `where`."""
    label_field: str | None = None
    """The field its labels were read from, named by messages (data.label_field); None: the source's own."""

    def where(self, split: str) -> str:
        """How a message names the source of `split`."""
        return self.named.get(split, f"data.{split}")

    def unlabelled_examples(self) -> list[Example]:
        """Every example only predicted, file after file."""
        return [e for file in self.unlabelled for e in file.examples]


def check_trainable(labelled: LabelledTask, o: FinetuneOptions) -> None:
    """Refuse a training split (as drawn, `o.max_train_examples`) with nothing to learn: one class, or one score.
    Every source alike, so the bag-of-words floor and the fine-tuning never meet one."""
    train = labelled.examples["train"]
    source = labelled.where("train")
    drawn = len(train) == o.max_train_examples
    if drawn:
        source = f"max_train_examples={o.max_train_examples} of {source}"
    if not labelled.classes:  # numbers to predict, scored by correlation
        if len({float(e.label) for e in train}) < 2:
            fix = "raise max_train_examples" if drawn else "give examples of at least two scores"
            raise LmptError(f"{source} gives every example the same score: nothing to predict ({fix})")
        for role in ("dev", "test"):
            scored = labelled.examples.get(role)
            if scored is not None and len({float(e.label) for e in scored}) < 2:
                raise LmptError(
                    f"{labelled.where(role)} gives its {len(scored)} example(s) one score: a correlation with them is "
                    "undefined (give a split with at least two different scores)"
                )
        return
    seen = label_order([e.label for e in train])
    if len(seen) < 2:
        field = "" if labelled.label_field is None else f" in field '{labelled.label_field}'"
        raise _one_class(source, f"{seen[0]!r}{field}", " (raise max_train_examples)" if drawn else "")


def _one_class(source: str, label: str, hint: str = "") -> LmptError:
    needs = f"a classifier needs examples of at least two classes{hint}"
    return LmptError(f"{source} has only one class ({label}): {needs}")


def capped(labelled: LabelledTask, most: int | None, seed: int) -> LabelledTask:
    """`labelled` training on at most `most` of its training examples, drawn from `seed` (kept in file order); the
    other splits whole."""
    train = labelled.examples["train"]
    if most is None or len(train) <= most:
        return labelled
    kept = sorted(random.Random(f"max_train_examples/{seed}").sample(range(len(train)), most))
    return replace(labelled, examples={**labelled.examples, "train": [train[i] for i in kept]})


def read_labelled(data: TaskData, name: str, numbers: bool = False) -> LabelledTask:
    """Every split of `data`'s files read and its labels checked against the training labels: a task of one class,
    or with a label training never saw, is refused. `numbers`: the labels are numbers to predict, each checked as it
    is read; training needs two different ones. `name`: the task's name."""
    named = {"train": f"data.train={data.train}"}
    if numbers:
        splits = {role: read_examples(getattr(data, role), role, data, numbers=True) for role in ("train", "dev")}
        if data.test is not None:
            splits["test"] = read_examples(data.test, "test", data, numbers=True)
        return LabelledTask(name, [], splits, named=named, label_field=data.label_field)
    assert data.train is not None and data.dev is not None, "check_task asked for both files"
    train = read_examples(data.train, "train", data)
    check_labels_agree(train, data.train)
    classes = label_order([e.label for e in train])
    if len(classes) < 2:  # before the other splits are held against it
        raise _one_class(f"data.train={data.train}", f"{classes[0]!r} in field '{data.label_field}'")
    splits = {"dev": read_examples(data.dev, "dev", data)}
    if data.test is not None:
        splits["test"] = read_examples(data.test, "test", data)
    for role, split in splits.items():
        _check_labels(split, classes, role, getattr(data, role))
    return LabelledTask(name, classes, {"train": train, **splits}, named=named, label_field=data.label_field)


class ExampleSource(Protocol):
    """Where a fine-tuned task's examples come from: lmpt-finetune's data.* files (`LabelledFiles`), or a
    benchmark's folder (lmpt.downstream.glue.GlueSource)."""

    def read(self, numbers: bool = False) -> LabelledTask:
        """The task read and checked; `numbers`: its labels are numbers to predict (where the source does not say)."""
        ...

    def texts(self) -> list[str]:
        """The texts a quality stage decontaminates the training text against: every dev and test example's."""
        ...


@dataclass(frozen=True)
class LabelledFiles:
    """A task's files (data.train, data.dev, data.test and the fields they are read by), as a source of examples."""

    data: TaskData
    name: str

    def read(self, numbers: bool = False) -> LabelledTask:
        return read_labelled(self.data, self.name, numbers)

    def texts(self) -> list[str]:
        """Every string field of every dev and test record, one text a record."""
        files = [Path(file) for file in (self.data.dev, self.data.test) if file]
        return [text for file in files for text in _record_texts(file)]


def _record_texts(path: Path) -> Iterator[str]:
    """Every string field of every record of a .jsonl file, as one text per record."""
    for _, record in jsonl_records(path):
        values = record.values() if isinstance(record, dict) else [record]
        text = " ".join(v for v in values if isinstance(v, str))
        if text.strip():
            yield text
