"""Where the downstream records live, RUN/downstream/TASK.json and the hand runs' RUN/downstream/hand/*.json, and how
they are written and read back: `write_record` writes a result whole (its kind's codec, `Result.to_json`;
lmpt.safe_files.write_atomically), `read_record` and `decode` read one back as its kind's Result (`Result.from_json`),
whose figures every reader reads by name, each checked for its type, so no reader checks a plain dict by hand. Every
record written before reads back, and `raw` keeps the whole object. A record names the kind that wrote it (`kind`,
with `record_version`: lmpt.downstream.task.RECORD_VERSION); one written before records named their kind is read by
its keys (`Result.wrote`, the registry's one legacy path); a record no kind recognises (a hand-written one, the GLUE
suite's) still reads, as an `UnknownRecord` (`kind` "").

Where records live. RUN/downstream/TASK.json is the run's own scoring's (the `downstream`
group, when training ends): what sweeps, studies and reports read. A hand run (`lmpt-finetune RUN task=NAME`,
`lmpt-eval RUN task=NAME`) keeps its record beside them in RUN/downstream/hand/NAME-TIME.json, never over the run's
own, and no reader of RUN/downstream/*.json sees it. Each record is written and read back by this codec, replaced
whole (written beside it, synced, renamed).

A stop while the downstream tasks are scored after training. The final model and its checkpoint are written by
then, and scoring keeps nothing worth a checkpoint but the tasks already recorded:

- Before the first task, status.json says `scoring` (written atomically), so a run killed while scoring (`kill -9`,
  a lost node) reads as unfinished, never as completed without its figures.
- After each task, RUN/scoring.json (the scoring's ledger, also atomic) names the step scored, the tasks recorded in
  RUN/downstream/ and the seconds spent scoring over every launch so far.
- A stop signal stops the scoring at once (lmpt.train.preemption.PreemptionFlag with `stops`) and the run leaves as
  a graceful stop in training does: status.json says preempted, in phase `scoring`, naming the tasks recorded; the
  resume command is printed; the exit code is 75.

The same command (`lmpt trainer.resume=RUN`, or the original one), after a signal or a `kill -9`, finds the run
trained to its last step, trains nothing, keeps the tasks the ledger names for that step, scores the others, and
completes the run with `downstream_s` counting every launch's scoring (a killed launch's up to its last recorded
task); the ledger is then removed."""

from __future__ import annotations

import contextlib
import json
import math
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.markup import escape

from lmpt.console import info, warn
from lmpt.downstream.significance import decode_outcomes
from lmpt.downstream.task import Result, UnknownRecord, read_result
from lmpt.errors import LmptError
from lmpt.rundir.directory import read_status, write_status
from lmpt.safe_files import write_atomically
from lmpt.train.preemption import PreemptionFlag, stop_for_requeue

if TYPE_CHECKING:
    from lmpt.train.run import TrainResult


def decode(raw: dict[str, Any]) -> Result:
    """A record's JSON object as its kind's Result (`read_result`), or an `UnknownRecord` when no kind recognises it:
    each field read for its type, nothing refused (a field of the wrong type is said by `malformed`,
    `per_seed_malformed`)."""
    return read_result(raw) or UnknownRecord(raw)


def encode(record: Result | dict[str, Any]) -> str:
    """A record as the JSON text its file holds; a NaN or infinity (which JSON cannot hold) is a ValueError."""
    raw = record.to_json() if isinstance(record, Result) else record
    return json.dumps(raw, indent=1, allow_nan=False) + "\n"


def write_record(path: Path, record: Result | dict[str, Any]) -> None:
    """`record` as JSON at `path`, whole or absent (`write_atomically`); a NaN or infinity is refused and nothing is
    written."""
    try:
        text = encode(record)
    except ValueError:
        raise LmptError(f"the record {path} holds a value that is not a finite number: nothing was written") from None
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def read_record(path: Path) -> Result | None:
    """The record at `path`, as its kind's Result (`decode`); None when it is missing, unreadable or not a JSON
    object."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return decode(raw) if isinstance(raw, dict) else None


def task_record(run_dir: Path, task: str) -> Result | None:
    """RUN/downstream/TASK.json, typed (`read_record`); a file there that is no record is named once on the console
    (the reports read on without it, never silently)."""
    path = run_dir / DOWNSTREAM_DIR / f"{task}.json"
    record = read_record(path)
    if record is None and path.is_file() and path not in _NAMED:
        _NAMED.add(path)
        warn(escape(f"{path} is not a readable record (not a JSON object): its figures are left out"))
    return record


_NAMED: set[Path] = set()
"""Unreadable records already named on the console."""


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


SCORING = "scoring"
"""status.json's `phase` of a run stopped while its downstream tasks were scored (training had finished), and its
`status` while they are being scored."""
LEDGER = "scoring.json"
"""RUN/scoring.json: the step a scoring is of, the tasks it recorded, and its seconds over every launch."""


@dataclass
class ScoringProgress:
    """Which tasks of a run's downstream scoring are recorded in RUN/downstream/TASK.json; with `step`, each one
    recorded is also written to the scoring's ledger (RUN/scoring.json) with the seconds spent so far."""

    kept: frozenset[str] = frozenset()
    """The tasks an interrupted scoring of this same step recorded: read back, not scored again."""
    recorded: list[str] = field(default_factory=list)
    """The tasks recorded so far by this scoring (the kept ones included), in order."""
    step: int | None = None
    """The step scored (None: no ledger is kept)."""
    earlier_s: float = 0.0
    """Seconds the earlier, interrupted launches of this scoring spent."""
    started: float = field(default_factory=time.perf_counter)

    def seconds(self) -> float:
        """Seconds spent scoring over every launch: the earlier ones' and this one's so far."""
        return self.earlier_s + time.perf_counter() - self.started

    def kept_record(self, run_dir: Path, task: str) -> dict | None:
        """The record of `task` when it is kept and its record is still whole and its own (then counted as
        recorded); None: score the task (and `write_record` it). The console says which."""
        path = record_path(run_dir, task)
        if task not in self.kept:
            info(f"scoring {task}")
            return None
        record = read_record(path)
        if record is None or record.task != task:
            info(f"scoring {task} (its record from before the stop is unreadable)")
            return None
        disagreement = disagrees_with_its_items(record.raw)
        if disagreement:
            info(f"scoring {task} again: its record from before the stop {disagreement}")
            return None
        info(f"{task}: kept as scored before the stop ({path})")
        self._recorded(run_dir, task)
        return record.raw

    def write_record(self, run_dir: Path, task: str, record: dict) -> dict:
        """`record`, the result of scoring `task`, written to RUN/downstream/TASK.json and counted as recorded."""
        write_record(record_path(run_dir, task), record)
        self._recorded(run_dir, task)
        return record

    def _recorded(self, run_dir: Path, task: str) -> None:
        self.recorded.append(task)
        if self.step is not None:
            write_ledger(run_dir, self.step, self.recorded, self.seconds())


def disagrees_with_its_items(raw: dict) -> str:
    """Why a kept record cannot be adopted as it stands ("" when it can): a figure that is a share of items right
    (F beside its per-item outcomes F_items) must be the share its own outcomes give."""
    for key, value in raw.items():
        if not key.endswith("_items") or not isinstance(value, str):  # significance.figure_outcomes' F_items
            continue
        figure = key.removesuffix("_items")
        outcomes = decode_outcomes(value)
        stated = raw.get(figure)
        if outcomes is None or not isinstance(stated, int | float) or isinstance(stated, bool):
            continue
        if not math.isclose(float(stated), float(outcomes.mean()), abs_tol=1e-9):
            return f"says {figure} {stated:g} where its {outcomes.size} items give {outcomes.mean():g}"
    return ""


def write_ledger(run_dir: Path, step: int, recorded: list[str], seconds: float) -> None:
    """RUN/scoring.json, whole or absent: the scoring of `step` recorded `recorded` in `seconds` so far."""
    text = json.dumps({"step": step, "recorded": recorded, "seconds": round(seconds, 3)}) + "\n"
    write_atomically(run_dir / LEDGER, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def read_ledger(run_dir: Path, step: int) -> tuple[frozenset[str], float]:
    """(the tasks recorded, the seconds spent) by an interrupted scoring of `step`, as RUN/scoring.json says; empty
    and 0 when there is none, it is of another step (the run trained on since: its records are of older weights),
    or it cannot be read."""
    try:
        ledger = json.loads((run_dir / LEDGER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return frozenset(), 0.0
    if not isinstance(ledger, dict) or ledger.get("step") != step or not isinstance(ledger.get("recorded"), list):
        return frozenset(), 0.0
    seconds = ledger.get("seconds")
    seconds = float(seconds) if isinstance(seconds, int | float) and seconds >= 0 else 0.0
    return frozenset(t for t in ledger["recorded"] if isinstance(t, str)), seconds


def recorded_before(run_dir: Path, step: int) -> frozenset[str]:
    """The tasks an interrupted scoring of `step` had recorded: the ledger's (`read_ledger`) and, for a run stopped
    by an lmpt that kept no ledger, those its status.json names when a stop signal ended that scoring. Empty when
    the run was not interrupted while scoring, or at another step (it trained on since: its records are of older
    weights)."""
    status = read_status(run_dir)
    recorded = status.get("recorded")
    named: frozenset[str] = frozenset()
    if (status.get("status"), status.get("phase"), status.get("step")) == ("preempted", SCORING, step):
        named = frozenset(t for t in recorded if isinstance(t, str)) if isinstance(recorded, list) else frozenset()
    return named | read_ledger(run_dir, step)[0]


@contextlib.contextmanager
def stoppable_scoring(result: TrainResult, world_size: int) -> Iterator[ScoringProgress]:
    """Rank 0 scores the downstream tasks of the completed `result` (and completes the run) in the body. A stop
    signal ends the body at once: status.json says preempted in phase `scoring` with the tasks recorded, the
    resume command (for `world_size` processes) is printed, and the process exits with EXIT_PREEMPTED."""
    run_dir, step = result.run_path, result.step
    assert run_dir is not None, "rank 0 scores, and it knows the run directory"
    progress = ScoringProgress(recorded_before(run_dir, step), step=step, earlier_s=read_ledger(run_dir, step)[1])
    write_status(
        run_dir,
        SCORING,
        step=step,
        phase=SCORING,
        wall_s=result.wall_s,
        train_s=result.train_s,
        recorded=sorted(progress.kept),
        downstream_s=round(progress.earlier_s, 3),
    )
    flag = PreemptionFlag(stops="the downstream scoring")
    try:
        with flag:
            yield progress
        (run_dir / LEDGER).unlink(missing_ok=True)  # the run completed: nothing of this scoring is left to resume
    except BaseException:
        if not flag.requested:  # whatever exception the stop became on the way out (lmpt.stopping)
            raise
        write_ledger(run_dir, step, progress.recorded, progress.seconds())
        done = f"{len(progress.recorded)} task(s) recorded" if progress.recorded else "no task recorded"
        said = f"stopped scoring the downstream tasks ({done}); the run is trained to step {result.step}"
        stop_for_requeue(
            flag,
            run_dir,
            result.step,
            result.wall_s,
            world_size,
            said,
            phase=SCORING,
            train_s=result.train_s,
            recorded=progress.recorded,
        )
