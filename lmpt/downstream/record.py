"""The record of a fine-tuning: RUN/downstream/TASK.json, replaced whole (written beside it, synced, renamed)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from lmpt.errors import LmptError
from lmpt.safe_files import write_atomically

DOWNSTREAM_DIR = "downstream"


def record_path(run_dir: Path, task: str) -> Path:
    """Where the record of `task` lives in `run_dir`; a task name that is not a plain file name is refused."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._+-]*", task):
        raise LmptError(f"task={task!r} cannot name a file: use letters, digits, '.', '_', '+' or '-'")
    return run_dir / DOWNSTREAM_DIR / f"{task}.json"


def write_record(path: Path, record: dict) -> None:
    """`record` as JSON at `path`, whole or absent (`write_atomically`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, lambda tmp: tmp.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8"))
