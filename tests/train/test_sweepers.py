"""Hydra sweepers over lmpt: an optuna study minimises the validation loss each job returns, and a failed trial
is recorded as failed while the study goes on."""

from __future__ import annotations

import json
from pathlib import Path

from omegaconf import OmegaConf
from runner import SMALL, records, run_lmpt

from lmpt.app import sweep_value


def test_optuna_study_minimises_validation_loss_past_a_failed_trial(tmp_path: Path) -> None:
    """Seed 16 draws 3e-4, then -1.0 (refused), then 3e-3: the failure comes mid-study. (Not the grid sampler:
    with hydra-optuna-sweeper 1.3 a failed *last* grid point makes optuna's Study.stop raise in the plugin.)"""
    result = run_lmpt(
        "-m",
        "hydra/sweeper=optuna",
        "hydra/sweeper/sampler=random",
        "hydra.sweeper.sampler.seed=16",
        "hydra.sweeper.n_trials=3",
        *SMALL,
        "model.n_layers=1",
        "trainer.max_steps=2",
        "trainer.sample_tokens=0",
        "trainer.eval_batches=1",
        "optimizer.lr=choice(3e-3,-1.0,3e-4)",
        cwd=tmp_path,
    )
    assert result.returncode == 2, result.stderr  # a trial failed on bad input; the others ran
    assert "optimizer.lr=-1.0 is invalid" in result.stderr and "1 sweep job(s) failed; the others ran" in result.stderr
    headers = [line.split(":")[0] for line in result.stdout.splitlines() if line.startswith("job ")]
    assert headers == ["job 1", "job 2", "job 3"]  # no total: optuna decides the trials as it goes
    (sweep,) = (tmp_path / "multirun").glob("*/*")
    jobs = {OmegaConf.load(job / ".hydra" / "overrides.yaml")[0]: job for job in sweep.iterdir() if job.name.isdigit()}
    assert sorted(jobs) == ["optimizer.lr=-1.0", "optimizer.lr=0.0003", "optimizer.lr=0.003"]  # all three trials
    status = {key: json.loads((job / "status.json").read_text())["status"] for key, job in jobs.items()}
    assert status == {
        "optimizer.lr=-1.0": "failed",
        "optimizer.lr=0.0003": "completed",
        "optimizer.lr=0.003": "completed",
    }
    val = {
        key: [r["val_loss"] for r in records(job) if "val_loss" in r][-1]
        for key, job in jobs.items()
        if status[key] == "completed"
    }
    best = OmegaConf.load(sweep / "optimization_results.yaml")
    assert best.best_value == min(val.values())
    assert f"optimizer.lr={best.best_params['optimizer.lr']}" == min(val, key=val.get)


def test_a_sweep_job_reports_a_finite_value_or_none() -> None:
    assert sweep_value(2.5) == 2.5
    assert sweep_value(float("nan")) is None and sweep_value(float("inf")) is None and sweep_value(None) is None
