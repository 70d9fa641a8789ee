"""The records of a run's downstream tasks. RUN/downstream/TASK.json is the run's own scoring's (the `downstream`
group, when training ends): what sweeps, studies and reports read. A hand run (`lmpt-finetune RUN task=NAME`,
`lmpt-eval RUN task=NAME`) keeps its record beside them in RUN/downstream/hand/NAME-TIME.json, never over the run's
own, and no reader of RUN/downstream/*.json sees it. Each record is written and read back by one codec
(lmpt.downstream.codec), replaced whole (written beside it, synced, renamed)."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

from lmpt.errors import LmptError

DOWNSTREAM_DIR = "downstream"
HAND_DIR = "hand"
"""RUN/downstream/hand/: the records of hand runs, out of reach of the glob RUN/downstream/*.json."""


def record_path(run_dir: Path, task: str, named_by: str | None = None) -> Path:
    """Where the record of `task` lives in `run_dir`; a task name that is not a plain file name is refused, as the
    user typed it (`task=...`), or naming what it came from (`named_by`, e.g. "data.train=FILE")."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._+-]*", task):
        what = f"task={task}" if named_by is None else f"{named_by} gives the task name {task!r}, which"
        fix = "use" if named_by is None else "set task=NAME of"
        raise LmptError(f"{what} cannot name a file: {fix} letters, digits, '.', '_', '+' or '-'")
    return run_dir / DOWNSTREAM_DIR / f"{task}.json"


def hand_record_path(run_dir: Path, task: str, named_by: str | None = None) -> Path:
    """Where a hand run of `task` on `run_dir` keeps its record: RUN/downstream/hand/TASK-YYYYMMDD-HHMMSS.json (a
    suffix -2, -3 ... when that second is taken), never the run's own record (`record_path`, whose checks of the
    name it shares)."""
    own = record_path(run_dir, task, named_by)
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    path, n = own.parent / HAND_DIR / f"{task}-{stamp}.json", 1
    while path.exists():
        n += 1
        path = own.parent / HAND_DIR / f"{task}-{stamp}-{n}.json"
    return path
