"""Classification, a fine-tuned kind: a folder of labelled SPLIT.jsonl files, or a task lmpt ships (bundled:NAME),
read and checked by lmpt.downstream.tasks (its labels against training's), fine-tuned once per seed beside its
scratch control and bag-of-words floor (lmpt.downstream.finetuning.finetune)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from lmpt.data.readers.jsonl import jsonl_records
from lmpt.downstream.figures import (
    ACCURACY,
    ACCURACY_GAIN,
    ACCURACY_MEAN,
    BAG_OF_WORDS,
    BOW_ACCURACY,
    CLASSIFICATION_FIGURES,
    GAIN,
    SCRATCH,
    SCRATCH_ACCURACY_MEAN,
    mean_of,
)
from lmpt.downstream.kinds.base import TaskKind
from lmpt.downstream.tasks.choice_tasks import BUNDLED_PREFIX
from lmpt.downstream.tasks.options import FinetuneOptions, TaskData
from lmpt.downstream.tasks.task_files import bundled_classification_tasks, task_folder
from lmpt.errors import LmptError

if TYPE_CHECKING:
    from lmpt.quality.decontamination import TaskItems
    from lmpt.rundir.trained import Trained


@dataclass(frozen=True)
class ClassificationTask:
    """A classification task as downstream.classification_tasks names it: its record's name and its files."""

    name: str
    data: TaskData


class Classification(TaskKind):
    name: ClassVar[str] = "classification"
    listing_order: ClassVar[int] = 2

    @classmethod
    def holds_record(cls, raw: dict[str, Any]) -> bool:
        return "per_seed" in raw or ACCURACY_MEAN in raw  # what only a fine-tuning reports

    @classmethod
    def names_folder(cls, task: str) -> bool:
        if task.startswith(BUNDLED_PREFIX):  # lmpt/tasks/blimp/ is a folder too: only a task's files make one
            return task.removeprefix(BUNDLED_PREFIX) in bundled_classification_tasks()
        return Path(task).expanduser().is_dir()

    @classmethod
    def find(cls, task: str, key: str) -> ClassificationTask:
        """A folder holding train.jsonl and dev.jsonl (test.jsonl optional), or bundled:NAME (lmpt/tasks/NAME/),
        found as lmpt-finetune's task= finds it (tasks.task_files.task_folder)."""
        return ClassificationTask(*task_folder(task, key))

    @classmethod
    def decontamination_texts(cls, task: str, key: str) -> TaskItems:
        """Every string field of every dev and test record, one text a record."""
        from lmpt.quality.decontamination import TaskItems

        found = cls.find(task, key)
        files = [Path(found.data.dev), *([Path(found.data.test)] if found.data.test else [])]
        return TaskItems(found.name, [text for file in files for text in _record_texts(file)])

    @classmethod
    def options(cls, downstream: Any, task: ClassificationTask, device: str) -> FinetuneOptions:
        """How a run fine-tunes `task` after training on `device` (cpu or cuda): downstream.lr fixed is the mode's
        fixed rate (lr=None), search or a number as lmpt-finetune takes them (checked at start-up with the task)."""
        return FinetuneOptions(
            data=task.data, task=task.name, mode=downstream.mode, seeds=downstream.seeds, epochs=downstream.epochs,
            batch_size=downstream.batch_size, device=device, lr=None if downstream.lr == "fixed" else downstream.lr,
            control=downstream.control,
        )  # fmt: skip

    @classmethod
    def check(cls, options: FinetuneOptions, key: str, seq_len: int, max_seq_len: int) -> None:
        """The task read and checked as fine-tuning checks it (lmpt.downstream.finetuning.finetune.check_task: its
        options, its labels, and the run's data.seq_len `seq_len` against the model's `max_seq_len`), before any
        training; a problem is one LmptError naming `key` and the task."""
        from lmpt.downstream.finetuning.finetune import check_task  # torch-heavy: only when a task is named

        try:
            check_task(options, max_seq_len, seq_len)
        except LmptError as exc:
            raise LmptError(f"{key} ({options.task}): {exc}") from None

    @classmethod
    def score(cls, trained: Trained, options: FinetuneOptions) -> dict:
        """The task fine-tuned on `trained` (lmpt.downstream.finetuning.finetune.finetune): its result."""
        from lmpt.downstream.finetuning.finetune import finetune  # torch-heavy: only when a task is scored

        return finetune(trained, options)

    @classmethod
    def logged(cls, result: dict) -> dict[str, float]:
        """What a fine-tuning logs to metrics.jsonl after training: CLASSIFICATION_FIGURES and, with a scratch
        control, the control's dev accuracy, the gain over it and the bag-of-words floor."""
        figures = {k: result[k] for k in CLASSIFICATION_FIGURES if k in result}
        if result.get("control") == SCRATCH:
            figures[SCRATCH_ACCURACY_MEAN] = result[SCRATCH][mean_of(ACCURACY)]
            figures[ACCURACY_GAIN] = result[GAIN][ACCURACY]["gain"]
            figures[BOW_ACCURACY] = result[BAG_OF_WORDS][ACCURACY]
        return figures


def _record_texts(path: Path):
    """Every string field of every record of a .jsonl file, as one text per record."""
    for _, record in jsonl_records(path):
        values = record.values() if isinstance(record, dict) else [record]
        text = " ".join(v for v in values if isinstance(v, str))
        if text.strip():
            yield text
