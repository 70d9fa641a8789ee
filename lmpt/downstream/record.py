"""The record of a fine-tuning: RUN/downstream/TASK.json, replaced whole (written beside it, synced, renamed)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from lmpt.errors import LmptError
from lmpt.safe_files import write_atomically

DOWNSTREAM_DIR = "downstream"


def record_path(run_dir: Path, task: str, named_by: str | None = None) -> Path:
    """Where the record of `task` lives in `run_dir`; a task name that is not a plain file name is refused, as the
    user typed it (`task=...`), or naming what it came from (`named_by`, e.g. "data.train=FILE")."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._+-]*", task):
        what = f"task={task}" if named_by is None else f"{named_by} gives the task name {task!r}, which"
        fix = "use" if named_by is None else "set task=NAME of"
        raise LmptError(f"{what} cannot name a file: {fix} letters, digits, '.', '_', '+' or '-'")
    return run_dir / DOWNSTREAM_DIR / f"{task}.json"


def write_record(path: Path, record: dict) -> None:
    """`record` as JSON at `path`, whole or absent (`write_atomically`); a NaN or infinity (which JSON cannot hold)
    is refused and nothing is written."""
    try:
        text = json.dumps(record, indent=1, allow_nan=False) + "\n"
    except ValueError:
        raise LmptError(f"the record {path} holds a value that is not a finite number: nothing was written") from None
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
