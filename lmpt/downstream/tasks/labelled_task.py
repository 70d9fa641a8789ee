"""A labelled classification task read and checked (`read_labelled`: every split's labels checked against the
training labels, classes in a fixed order by `label_order`, and the task's name), before any model is needed
(tokenised for one by lmpt.downstream.finetuning.encoding.encode_task)."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, replace
from pathlib import Path

from lmpt.downstream.tasks.glue import glue_examples
from lmpt.downstream.tasks.options import FinetuneOptions
from lmpt.downstream.tasks.task_files import Example, read_examples
from lmpt.errors import LmptError


def task_name(options: FinetuneOptions) -> str:
    """`task=`, else the train file's name without its suffixes (its folder's when the file is train.*)."""
    if options.task:
        return options.task
    path = Path(options.data.train or "")
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


@dataclass(frozen=True)
class LabelledTask:
    """A task's splits read and their labels checked, before any tokenizer is needed (what `lmpt` checks at
    start-up, lmpt.downstream.after_training.check_downstream)."""

    name: str
    classes: list[str]
    """The training labels as written, in class-id order (`label_order`); empty for a task whose labels are numbers
    to predict (regression)."""
    examples: dict[str, list[Example]]
    """The examples by split: "train", "dev" and, when given, "test"."""


def check_trainable(labelled: LabelledTask, o: FinetuneOptions) -> None:
    """Refuse a training split (as drawn, `o.max_train_examples`) with nothing to learn: one class, or one score.
    GLUE's folders and data.train files alike, so the bag-of-words floor and the fine-tuning never meet one."""
    train = labelled.examples["train"]
    source = f"data.dir={o.data.dir} ({labelled.name})" if o.data.dir is not None else f"data.train={o.data.train}"
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
                split = f"data.dir={o.data.dir} ({labelled.name}, {role})" if o.data.dir else f"data.{role}"
                raise LmptError(
                    f"{split} gives its {len(scored)} example(s) one score: a correlation with them is undefined "
                    "(give a split with at least two different scores)"
                )
        return
    seen = label_order([e.label for e in train])
    if len(seen) < 2:
        field = "" if o.data.dir is not None else f" in field '{o.data.label_field}'"
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


def read_labelled(o: FinetuneOptions, numbers: bool = False) -> LabelledTask:
    """Every split of `o.data` read and its labels checked against the training labels: a task of one class, or
    with a label training never saw, is refused. `numbers`: the labels are numbers to predict, each checked as it
    is read; training needs two different ones."""
    data = o.data
    if data.dir is not None:  # a GLUE task (downstream.classification_tasks=[glue:NAME@DIR]), read as it ships
        task, examples = glue_examples(data.dir, o.task or "", "data.dir")
        return LabelledTask(task.name, list(task.labels), examples)
    if numbers:
        splits = {role: read_examples(getattr(data, role), role, data, numbers=True) for role in ("train", "dev")}
        if data.test is not None:
            splits["test"] = read_examples(data.test, "test", data, numbers=True)
        return LabelledTask(task_name(o), [], splits)
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
    return LabelledTask(task_name(o), classes, {"train": train, **splits})
