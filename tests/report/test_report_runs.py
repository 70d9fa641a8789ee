"""Reading run directories: names, status, final evaluation, speed, wall time, curves, and the search."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from report_fakes import SHARED, make_run, make_sweep, train_record

from lmpt.errors import LmptError
from lmpt.report.runs import find_runs, read_run


def test_sweep_jobs_are_found_in_natural_order(tmp_path: Path) -> None:
    sweep = make_sweep(tmp_path)
    runs = find_runs([tmp_path])  # any parent of the sweep will do
    assert [r.path.name for r in runs] == ["0", "1", "2", "3", "10"]
    assert [r.path for r in find_runs([sweep])] == [r.path for r in runs]


def test_completed_run_reports_its_last_evaluation(tmp_path: Path) -> None:
    run = read_run(make_sweep(tmp_path) / "0")
    assert run.name == " ".join([*SHARED, "optimizer.lr=0.001"])
    assert run.overrides[-1] == "optimizer.lr=0.001"
    assert run.objective == "clm"
    assert run.status == "completed"
    assert run.step == 30
    assert run.val_loss == 6.3
    assert math.isclose(run.val_ppl, math.exp(6.3), rel_tol=1e-6)
    assert run.measures == {"val_acc": 0.04}
    assert run.tokens_per_s == 8000.0  # the median of 1000, 9000, 8000: the slow first step does not count
    assert run.wall_s == 12.5
    assert run.val_curve == [(10, 6.7), (20, 6.4), (30, 6.3)]
    assert run.train_curve == [(10, 6.9), (20, 6.6), (30, 6.5)]


def test_objective_measures_are_every_val_key_of_the_last_evaluation(tmp_path: Path) -> None:
    run = read_run(make_sweep(tmp_path) / "1")
    assert run.objective == "ul2-mixture"
    assert run.measures == {"val_acc": 0.04, "val_loss/R3-0.15": 6.0, "val_loss/S": 5.7}
    assert run.tokens_per_s == 5000.0


def test_failed_preempted_and_unfinished_runs(tmp_path: Path) -> None:
    sweep = make_sweep(tmp_path)
    failed, running, preempted = (read_run(sweep / job) for job in ("2", "3", "10"))
    assert failed.status == "failed: optimizer.lr=bad: not a number"
    assert (failed.step, failed.val_loss, failed.val_curve, failed.tokens_per_s) == (None, None, [], None)
    assert preempted.status == "preempted"
    assert (preempted.step, preempted.val_loss) == (10, None)
    assert running.status == "incomplete"
    assert running.step == 20  # the torn last line of a killed run is skipped
    assert running.val_loss == 6.9
    assert running.wall_s == pytest.approx(42.0)  # no status.json: from Hydra's first file to the last write


def test_run_without_overrides_or_status_is_named_by_its_directory(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path / "outputs" / "2026-11-21" / "10-00-00", [], [train_record(10, 6.0, 100.0)])
    run = read_run(run_dir)
    assert run.name == "10-00-00"
    assert run.status == "completed"  # model.safetensors written before status.json existed
    assert find_runs([run_dir])[0].path == run_dir.resolve()


def test_missing_path_is_named(tmp_path: Path) -> None:
    with pytest.raises(LmptError, match="nowhere does not exist"):
        find_runs([tmp_path / "nowhere"])


def test_no_runs_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "empty" / "sub").mkdir(parents=True)
    with pytest.raises(LmptError, match="no run directories"):
        find_runs([tmp_path / "empty"])
