"""A stop signal while the downstream tasks are scored after training. The final model and its checkpoint are
written by then, and scoring keeps nothing worth a checkpoint but the tasks already recorded, so the signal stops
the scoring at once (lmpt.train.preemption.PreemptionFlag with `stops`) and the run leaves as a graceful stop in
training does: status.json says preempted, in phase `scoring`, naming the tasks recorded; the resume command is
printed; the exit code is 75. That command (`lmpt trainer.resume=RUN`, or the original one) finds the run trained
to its last step, trains nothing, keeps the tasks recorded in RUN/downstream/ and scores the others."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from lmpt.console import info
from lmpt.downstream.record import record_path, write_record
from lmpt.rundir.directory import read_status
from lmpt.train.preemption import PreemptionFlag, StopRequested, stop_for_requeue

if TYPE_CHECKING:
    from lmpt.train.run import TrainResult

SCORING = "scoring"
"""status.json's `phase` of a run stopped while its downstream tasks were scored (training had finished)."""


@dataclass
class ScoringProgress:
    """Which tasks of a run's downstream scoring are recorded in RUN/downstream/TASK.json."""

    kept: frozenset[str] = frozenset()
    """The tasks a scoring stopped at this same step recorded: read back, not scored again."""
    recorded: list[str] = field(default_factory=list)
    """The tasks recorded so far by this scoring (the kept ones included), in order."""

    def kept_record(self, run_dir: Path, task: str) -> dict | None:
        """The record of `task` when it is kept and its record is still whole and its own (then counted as
        recorded); None: score the task (and `write_record` it). The console says which."""
        path = record_path(run_dir, task)
        if task not in self.kept:
            info(f"scoring {task}")
            return None
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            record = None
        if not isinstance(record, dict) or record.get("task") != task:
            info(f"scoring {task} (its record from before the stop is unreadable)")
            return None
        info(f"{task}: kept as scored before the stop ({path})")
        self.recorded.append(task)
        return record

    def write_record(self, run_dir: Path, task: str, record: dict) -> dict:
        """`record`, the result of scoring `task`, written to RUN/downstream/TASK.json and counted as recorded."""
        write_record(record_path(run_dir, task), record)
        self.recorded.append(task)
        return record


def recorded_before(run_dir: Path, step: int) -> frozenset[str]:
    """The tasks a scoring of `step` that a stop signal ended had recorded (status.json): empty when the run was
    not stopped while scoring, or stopped at another step (it trained on since: its records are of older weights)."""
    status = read_status(run_dir)
    recorded = status.get("recorded")
    if (status.get("status"), status.get("phase"), status.get("step")) != ("preempted", SCORING, step):
        return frozenset()
    return frozenset(t for t in recorded if isinstance(t, str)) if isinstance(recorded, list) else frozenset()


@contextlib.contextmanager
def stoppable_scoring(result: TrainResult, world_size: int) -> Iterator[ScoringProgress]:
    """Rank 0 scores the downstream tasks of the completed `result` (and completes the run) in the body. A stop
    signal ends the body at once: status.json says preempted in phase `scoring` with the tasks recorded, the
    resume command (for `world_size` processes) is printed, and the process exits with EXIT_PREEMPTED."""
    progress = ScoringProgress(recorded_before(result.run_path, result.step))
    flag = PreemptionFlag(stops="the downstream scoring")
    try:
        with flag:
            yield progress
    except StopRequested:
        done = f"{len(progress.recorded)} task(s) recorded" if progress.recorded else "no task recorded"
        said = f"stopped scoring the downstream tasks ({done}); the run is trained to step {result.step}"
        stop_for_requeue(flag, result.run_path, result.step, result.wall_s, world_size, said, phase=SCORING,
                         train_s=result.train_s, recorded=progress.recorded)  # fmt: skip
