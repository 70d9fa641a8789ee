"""A stand-in for the `wandb` package (no account, no network): records each call as a JSON line in the
file named by $FAKE_WANDB_LOG, so a test can check what lmpt asked Weights & Biases to do. Like W&B's server,
that file outlives the process: a resumed run's step counter continues after the last step logged to its id,
and a step below the counter is ignored, as W&B ignores it (recorded as "dropped")."""

from __future__ import annotations

import json
import os


def _record(**event) -> None:
    with open(os.environ["FAKE_WANDB_LOG"], "a") as f:
        f.write(json.dumps(event) + "\n")


def _history(run_id: str) -> list[dict]:
    path = os.environ["FAKE_WANDB_LOG"]
    if not os.path.exists(path):
        return []
    calls = [json.loads(line) for line in open(path).read().splitlines()]
    return [c for c in calls if c["call"] == "log" and c["id"] == run_id]


class Run:
    def __init__(self, id: str) -> None:
        self.id = id
        logged = _history(id)
        self.step = max(c["step"] for c in logged) + 1 if logged else 0
        """W&B's step counter: after a resume, one past the last step the run holds."""

    def log(self, data: dict, step: int) -> None:
        _record(call="log" if step >= self.step else "dropped", id=self.id, step=step, keys=sorted(data))
        self.step = max(self.step, step)

    def finish(self) -> None:
        _record(call="finish", id=self.id)


def init(project: str, id: str, resume: str, dir: str, name: str, config: dict) -> Run:
    run = Run(id)
    _record(call="init", project=project, id=id, resume=resume, dir=dir, seed=config["trainer"]["seed"])
    return run
