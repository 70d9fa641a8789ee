"""The texts of the downstream tasks a quality stage decontaminates against (lmpt.quality), read from the task
files as the downstream readers read them, and the quality stage of a run or a prepare built with them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from lmpt.config.quality_schema import check_quality
from lmpt.data.readers.jsonl import jsonl_records
from lmpt.downstream.after_training import classification_task
from lmpt.downstream.choice_tasks import BUNDLED_PREFIX, read_choice_task, task_name, tasks_dir
from lmpt.errors import LmptError
from lmpt.quality.decontamination import TaskItems
from lmpt.quality.stage import QualityStage


def quality_stage_for(quality: Any, downstream: Any) -> QualityStage | None:
    """The quality stage `quality` (the config group) asks for, None for quality=none: its settings checked and,
    when it decontaminates, every task read now, so a bad value or an unreadable task stops the command before any
    cache is touched."""
    settings = OmegaConf.to_object(quality)
    check_quality(settings)
    if not settings.active:
        return None
    tasks = []
    if settings.decontaminate:
        tasks = run_tasks(list(downstream.choice_tasks), list(downstream.classification_tasks),
                          list(settings.decontaminate_tasks))  # fmt: skip
    return QualityStage(settings, tasks)


def _record_texts(path: Path) -> Iterator[str]:
    """Every string field of every record of a .jsonl file, as one text per record."""
    for _, record in jsonl_records(path):
        values = record.values() if isinstance(record, dict) else [record]
        text = " ".join(v for v in values if isinstance(v, str))
        if text.strip():
            yield text


def read_task_items(task: str, key: str) -> TaskItems:
    """A task's items: a classification folder's dev and test records, or a multiple-choice task's contexts each
    followed by its gold answer. A task that cannot be read is one LmptError naming `key`."""
    try:
        path = Path(task).expanduser()
        if path.is_dir() or _bundled_folder(task):
            found = classification_task(task, key)
            files = [Path(found.data.dev), *([Path(found.data.test)] if found.data.test else [])]
            return TaskItems(found.name, [text for file in files for text in _record_texts(file)])
        questions = read_choice_task(task)
        return TaskItems(task_name(task), [f"{q.context} {q.choices[q.label]}" for q in questions])
    except LmptError as exc:
        raise LmptError(f"{key}: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise LmptError(
            f"{key}={task} cannot be read ({exc.__class__.__name__}: {exc}): fix the file or drop it"
        ) from None


def _bundled_folder(task: str) -> bool:
    return task.startswith(BUNDLED_PREFIX) and (tasks_dir() / task.removeprefix(BUNDLED_PREFIX)).is_dir()


def run_tasks(choice_tasks: list[str], classification_tasks: list[str], extra: list[str]) -> list[TaskItems]:
    """The items of every task to decontaminate against, each read now (so a bad file stops before any work)."""
    keyed = [(f"downstream.choice_tasks[{i}]", t) for i, t in enumerate(choice_tasks)]
    keyed += [(f"downstream.classification_tasks[{i}]", t) for i, t in enumerate(classification_tasks)]
    keyed += [(f"quality.decontaminate_tasks[{i}]", t) for i, t in enumerate(extra)]
    return [read_task_items(str(task), key) for key, task in keyed]
