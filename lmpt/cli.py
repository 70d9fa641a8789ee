"""The `lmpt` command: a Hydra app that composes a run from conf/ and trains it.

Every user error (a config typo, a bad value, a missing path) ends as one line on stderr and exit 2."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from omegaconf import DictConfig

from lmpt.app import exit_process, run_hydra_app

if TYPE_CHECKING:
    from lmpt.train.session import Session


def train(cfg: DictConfig) -> float:
    """Resolve the composed config once, train, score the downstream tasks, and close the run; returns the final
    validation loss (what a sweeper minimises). However the launch fails, even on an import, no half-made run
    directory is left behind."""
    from lmpt.train.session import training_session

    with training_session(cfg.trainer.strategy) as session:
        return _train(cfg, session)


def _train(cfg: DictConfig, session: Session) -> float:
    from lmpt.downstream.records import stoppable_scoring
    from lmpt.downstream.run_tasks import (  # heavy: after composition
        check_downstream,
        check_downstream_fits,
        curve_scorer,
        quality_stage_for,
        score_downstream,
    )
    from lmpt.objectives.registry import objective_class
    from lmpt.rundir.directory import failure_recorded
    from lmpt.train.run import complete_run, run_training
    from lmpt.train.spec import given_keys, resolve

    spec = resolve(cfg, given_keys())
    objective = objective_class(spec.objective.name)
    assert objective is not None, "resolve checked the objective's name"
    check_downstream(spec.downstream, objective, spec.data.seq_len, spec.model.max_seq_len)
    quality = quality_stage_for(spec.quality, spec.downstream)  # dedup, filters, decontamination, or None
    fits = partial(check_downstream_fits, spec.downstream, spec.model.max_seq_len)  # once the tokenizer exists
    result = run_training(spec, session, quality, curve_scorer(spec.downstream, spec.config), check=fits)
    if result.status == "completed" and session.is_main:
        with stoppable_scoring(result, session.ctx.world_size) as progress:  # a stop signal: exit for requeue
            assert result.run_path is not None, "rank 0 knows the run directory"
            with failure_recorded(result.run_path, lambda: result.step):
                score_downstream(spec.downstream, result.run_path, result.step, result.device, progress)
            complete_run(result, progress.seconds())  # every launch's scoring, an interrupted one's too
    return result.val_loss


def main() -> None:
    try:
        run_hydra_app(train, continue_runs=True)
    except SystemExit as exc:
        exit_process(exc.code)
    exit_process(0)
