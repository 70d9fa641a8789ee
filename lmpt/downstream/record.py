"""The record of a fine-tuning: RUN/downstream/TASK.json, replaced whole (written beside it, synced, renamed)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from lmpt.errors import LmptError
from lmpt.safe_files import fsync_dir, write_failure

DOWNSTREAM_DIR = "downstream"


def record_path(run_dir: Path, task: str) -> Path:
    """Where the record of `task` lives in `run_dir`; a task name that is not a plain file name is refused."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._+-]*", task):
        raise LmptError(f"task={task!r} cannot name a file: use letters, digits, '.', '_', '+' or '-'")
    return run_dir / DOWNSTREAM_DIR / f"{task}.json"


def write_record(path: Path, record: dict) -> None:
    """`record` as JSON at `path`, whole or absent: written to a temporary file beside it, synced, renamed."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(json.dumps(record, indent=1) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fsync_dir(path.parent)
    except OSError as exc:
        reason = write_failure(exc)
        if reason is None:
            raise
        raise LmptError(f"could not write {path} ({reason}): free space and run the same command again") from exc
    finally:
        tmp.unlink(missing_ok=True)
