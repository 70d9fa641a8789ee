"""A stand-in for the `wandb` package (no account, no network): records each call as a JSON line in the
file named by $FAKE_WANDB_LOG, so a test can check what lmpt asked Weights & Biases to do."""

from __future__ import annotations

import json
import os


def _record(**event) -> None:
    with open(os.environ["FAKE_WANDB_LOG"], "a") as f:
        f.write(json.dumps(event) + "\n")


class Run:
    def __init__(self, id: str) -> None:
        self.id = id

    def log(self, data: dict, step: int) -> None:
        _record(call="log", id=self.id, step=step, keys=sorted(data))

    def finish(self) -> None:
        _record(call="finish", id=self.id)


def init(project: str, id: str, resume: str, dir: str, name: str, config: dict) -> Run:
    _record(call="init", project=project, id=id, resume=resume, dir=dir, seed=config["trainer"]["seed"])
    return Run(id)
