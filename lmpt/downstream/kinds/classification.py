"""Classification, a fine-tuned kind: a folder of labelled SPLIT.jsonl files, a task lmpt ships (bundled:NAME) or a
GLUE task that is not scored by a correlation (glue:NAME@DIR), read and checked by lmpt.downstream.labelled (its labels
against training's), fine-tuned once per seed beside its scratch control and bag-of-words floor
(lmpt.downstream.finetune); scored by accuracy, macro-F1 and (two classes) Matthews correlation."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from lmpt.downstream.bundled import BUNDLED_PREFIX, bundled_classification_tasks, task_folder
from lmpt.downstream.figures import (
    ACCURACY,
    ACCURACY_MEAN,
    CLASSIFICATION_FIGURES,
    CONTROL_FIGURES,
)
from lmpt.downstream.glue import entry_is_regression, is_entry
from lmpt.downstream.kinds.fine_tuned import FineTunedTask, Found
from lmpt.downstream.kinds.fine_tuned_result import FineTunedResult

if TYPE_CHECKING:
    from lmpt.downstream.target import Target


@dataclass(frozen=True)
class ClassificationResult(FineTunedResult):
    kind: ClassVar[str] = "classification"
    logged_figures: ClassVar[tuple[str, ...]] = CLASSIFICATION_FIGURES
    control_figures: ClassVar[tuple[str, str, str]] = CONTROL_FIGURES
    headline_figure: ClassVar[str] = ACCURACY
    gain_figure: ClassVar[str] = ACCURACY

    @classmethod
    def wrote(cls, raw: dict[str, Any]) -> bool:
        return "per_seed" in raw or ACCURACY_MEAN in raw  # what only a fine-tuning reports


@dataclass(frozen=True, kw_only=True)
class Classification(FineTunedTask):
    kind: ClassVar[str] = "classification"
    listing_order: ClassVar[int] = 2
    result_type: ClassVar[type[FineTunedResult]] = ClassificationResult

    @classmethod
    def claims(cls, spec: str) -> bool:
        if is_entry(spec):  # a GLUE task that is not scored by correlation
            return not entry_is_regression(spec)
        if spec.startswith(BUNDLED_PREFIX):  # lmpt/tasks/blimp/ is a folder too: only a task's files make one
            return spec.removeprefix(BUNDLED_PREFIX) in bundled_classification_tasks()
        return Path(spec).expanduser().is_dir()

    @classmethod
    def find_files(cls, spec: str, key: str) -> Found:
        """A folder holding train.jsonl and dev.jsonl (test.jsonl optional), or bundled:NAME (lmpt/tasks/NAME/),
        found as lmpt-finetune's task= finds it (sources.task_folder)."""
        return Found.files(*task_folder(spec, key))

    @classmethod
    def target(cls) -> Target:
        """One logit a class, cross-entropy, accuracy (lmpt.downstream.target.CLASSES)."""
        from lmpt.downstream.target import CLASSES  # torch-heavy: only when a task is used

        return CLASSES
