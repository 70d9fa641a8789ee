"""Classification, a fine-tuned kind: a folder of labelled SPLIT.jsonl files, or a task lmpt ships (bundled:NAME),
read and checked by lmpt.downstream.tasks (its labels against training's), fine-tuned once per seed beside its
scratch control and bag-of-words floor (lmpt.downstream.finetuning.finetune)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

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
from lmpt.downstream.kinds.fine_tuned import FineTunedKind, FineTunedTask
from lmpt.downstream.tasks.choice_tasks import BUNDLED_PREFIX
from lmpt.downstream.tasks.glue import entry_is_regression, is_entry
from lmpt.downstream.tasks.task_files import bundled_classification_tasks, task_folder

if TYPE_CHECKING:
    from lmpt.downstream.finetuning.targets import Target


class Classification(FineTunedKind):
    name: ClassVar[str] = "classification"
    listing_order: ClassVar[int] = 2

    @classmethod
    def holds_record(cls, raw: dict[str, Any]) -> bool:
        return "per_seed" in raw or ACCURACY_MEAN in raw  # what only a fine-tuning reports

    @classmethod
    def names_folder(cls, task: str) -> bool:
        if is_entry(task):  # a GLUE task that is not scored by correlation
            return not entry_is_regression(task)
        if task.startswith(BUNDLED_PREFIX):  # lmpt/tasks/blimp/ is a folder too: only a task's files make one
            return task.removeprefix(BUNDLED_PREFIX) in bundled_classification_tasks()
        return Path(task).expanduser().is_dir()

    @classmethod
    def find_files(cls, task: str, key: str) -> FineTunedTask:
        """A folder holding train.jsonl and dev.jsonl (test.jsonl optional), or bundled:NAME (lmpt/tasks/NAME/),
        found as lmpt-finetune's task= finds it (tasks.task_files.task_folder)."""
        return FineTunedTask(*task_folder(task, key))

    @classmethod
    def target(cls) -> Target:
        """One logit a class, cross-entropy, accuracy (lmpt.downstream.finetuning.targets.CLASSES)."""
        from lmpt.downstream.finetuning.targets import CLASSES  # torch-heavy: only when a task is used

        return CLASSES

    @classmethod
    def logged(cls, result: dict) -> dict[str, float]:
        """What a fine-tuning logs to metrics.jsonl after training: CLASSIFICATION_FIGURES and, with a scratch
        control, the control's dev accuracy, the gain over it and the bag-of-words floor."""
        figures = {k: result[k] for k in CLASSIFICATION_FIGURES if k in result}
        if result.get("control") == SCRATCH:
            figures[SCRATCH_ACCURACY_MEAN] = result[SCRATCH][mean_of(ACCURACY)]
            figures[ACCURACY_GAIN] = result[GAIN][ACCURACY]["gain"]
            figures[BOW_ACCURACY] = result[BAG_OF_WORDS][ACCURACY]
        return figures | cls.official_logged(result)
