"""The `lmpt` command: a Hydra app that composes a run from conf/ and trains it.

Every user error (a config typo, a bad value, a missing path) ends as one line on stderr and exit 2."""

from __future__ import annotations

from omegaconf import DictConfig

from lmpt.app import exit_process, run_hydra_app


def train(cfg: DictConfig) -> float | None:
    from lmpt.train.run import run_training  # heavy imports only once the config is valid

    return run_training(cfg)


def main() -> None:
    try:
        run_hydra_app(train, continue_runs=True)
    except SystemExit as exc:
        exit_process(exc.code)
    exit_process(0)
