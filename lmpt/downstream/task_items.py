"""The texts of the downstream tasks a quality stage decontaminates against (lmpt.quality), each task read by its
kind as the kind reads it to score it (lmpt.downstream.kinds: a multiple-choice question's context and answer, a
minimal pair's two sentences, a classification folder's dev and test records), and the quality stage of a run or a
prepare built with them."""

from __future__ import annotations

from lmpt.config.quality_schema import QualityConfig, check_quality
from lmpt.config.schema import DownstreamConfig
from lmpt.config.schema import settings as schema_settings
from lmpt.downstream.kinds.registry import kind_of_task
from lmpt.errors import LmptError
from lmpt.quality.decontamination import TaskItems
from lmpt.quality.stage import QualityStage


def quality_stage_for(quality: QualityConfig, downstream: DownstreamConfig) -> QualityStage | None:
    """The quality stage `quality` (the config group) asks for, None for quality=none: its settings checked and,
    when it decontaminates, every task read now, so a bad value or an unreadable task stops the command before any
    cache is touched."""
    settings = schema_settings(quality, QualityConfig)
    check_quality(settings)
    if not settings.active:
        return None
    tasks = []
    if settings.decontaminate:
        tasks = run_tasks(
            list(downstream.choice_tasks), list(downstream.classification_tasks), list(settings.decontaminate_tasks)
        )
    return QualityStage(settings, tasks)


def read_task_items(task: str, key: str) -> TaskItems:
    """A task's items, as its kind gives them (`TaskKind.decontamination_texts`). A task that cannot be read is one
    LmptError naming `key`."""
    try:
        return kind_of_task(task).decontamination_texts(task, key)
    except LmptError as exc:
        raise LmptError(f"{key}: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise LmptError(
            f"{key}={task} cannot be read ({exc.__class__.__name__}: {exc}): fix the file or drop it"
        ) from None


def run_tasks(choice_tasks: list[str], classification_tasks: list[str], extra: list[str]) -> list[TaskItems]:
    """The items of every task to decontaminate against, each read now (so a bad file stops before any work)."""
    keyed = [(f"downstream.choice_tasks[{i}]", t) for i, t in enumerate(choice_tasks)]
    keyed += [(f"downstream.classification_tasks[{i}]", t) for i, t in enumerate(classification_tasks)]
    keyed += [(f"quality.decontaminate_tasks[{i}]", t) for i, t in enumerate(extra)]
    return [read_task_items(str(task), key) for key, task in keyed]
