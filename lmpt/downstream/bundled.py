"""The tasks lmpt ships inside the package (lmpt/tasks/, named `bundled:NAME`; built by scripts/make_tasks.py,
docs/tasks.md) and where a task's file or folder is: a zero-shot task's .jsonl file (`resolve_task`, a path or
bundled:NAME), a classification task's folder of SPLIT.jsonl files (`task_folder`, a folder or bundled:NAME), and a
task's short name (`task_name`)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from lmpt.downstream.labelled_files import TaskData
from lmpt.errors import LmptError

BUNDLED_PREFIX = "bundled:"


SPLITS = ("train", "dev", "test")
"""A task folder's files: SPLIT.jsonl (test optional)."""


def bundled_classification_tasks() -> list[str]:
    """The classification tasks lmpt ships: the folders of lmpt/tasks holding train.jsonl and dev.jsonl."""
    return sorted(p.name for p in tasks_dir().iterdir() if all((p / f"{s}.jsonl").is_file() for s in SPLITS[:2]))


def task_folder(task: str, key: str) -> tuple[str, TaskData]:
    """(name, files) of the task `key=task` names: bundled:NAME (lmpt/tasks/NAME/) or a folder, holding train.jsonl
    and dev.jsonl (test.jsonl optional); the name is the folder's."""
    bundled = task.startswith(BUNDLED_PREFIX)
    folder = tasks_dir() / task.removeprefix(BUNDLED_PREFIX) if bundled else Path(task).expanduser().resolve()
    train, dev, test = (folder / f"{split}.jsonl" for split in SPLITS)
    if bundled and not (train.is_file() and dev.is_file()):
        shipped = " or ".join(BUNDLED_PREFIX + name for name in bundled_classification_tasks())
        raise LmptError(f"{key}={task} is not a classification task lmpt ships: use {shipped}")
    if not (train.is_file() and dev.is_file()):
        raise LmptError(f"{key}={task} is not a folder holding train.jsonl and dev.jsonl: give such a folder")
    return folder.name, TaskData(str(train), str(dev), str(test) if test.is_file() else None)


def tasks_dir() -> Path:
    """The folder of tasks shipped inside the package (lmpt/tasks)."""
    return Path(str(resources.files("lmpt") / "tasks"))


def resolve_task(task: str) -> Path:
    """The file a `task=` value names: a path, or `bundled:NAME` for lmpt/tasks/NAME.jsonl (or NAME.jsonl.zst)."""
    if task.startswith(BUNDLED_PREFIX):
        name = task[len(BUNDLED_PREFIX) :].removesuffix(".jsonl")
        path = tasks_dir() / f"{name}.jsonl"
        if not path.is_file() and path.with_suffix(".jsonl.zst").is_file():
            path = path.with_suffix(".jsonl.zst")
        if not path.is_file():
            shipped = ", ".join(sorted(p.name.split(".")[0] for p in tasks_dir().glob("*.jsonl*")))
            raise LmptError(f"task={task} is not a bundled task: use one of {shipped} or a path to a .jsonl file")
        return path
    path = Path(task).expanduser()
    if path.is_dir():
        raise LmptError(f"task={task} is a directory: give the .jsonl file of multiple-choice records inside it")
    if not path.is_file():
        raise LmptError(f"task={task} does not exist: give a .jsonl file of multiple-choice records")
    return path


def task_name(task: str) -> str:
    """A short name for a task: the bundled name, or the file name without .jsonl."""
    name = task[len(BUNDLED_PREFIX) :] if task.startswith(BUNDLED_PREFIX) else Path(task).name
    for suffix in (".gz", ".zst", ".jsonl"):
        name = name.removesuffix(suffix)
    return name
