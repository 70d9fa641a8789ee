"""lmpt-compare's wall time: a resumed run's training over every launch (status.json's train_s), not its last launch
(wall_s, 0.0 s for a launch that only closed the run), and the downstream scoring time beside it."""

from __future__ import annotations

from pathlib import Path

from report_fakes import make_run, train_record

from lmpt.report.runs import read_run
from lmpt.report.table import formatted_rows


def test_a_resumed_run_shows_its_training_over_every_launch_and_its_scoring(tmp_path: Path) -> None:
    status = {"status": "completed", "step": 20, "wall_s": 0.0, "train_s": 120.0, "downstream_s": 30.0}
    run = read_run(make_run(tmp_path / "run", ["trainer.max_steps=20"], [train_record(20, 6.0, 100.0)], status=status))
    assert run.wall_s == 120.0 and run.downstream_s == 30.0
    header, rows = formatted_rows([run])
    row = dict(zip(header, rows[0], strict=True))
    assert row["wall_s"] == "2m00s" and row["downstream_s"] == "30.0s"


def test_runs_without_scoring_have_no_downstream_column(tmp_path: Path) -> None:
    status = {"status": "completed", "step": 20, "wall_s": 12.5}  # written before train_s: the last launch's
    run = read_run(make_run(tmp_path / "run", ["trainer.max_steps=20"], [train_record(20, 6.0, 100.0)], status=status))
    header, rows = formatted_rows([run])
    assert "downstream_s" not in header and rows[0][header.index("wall_s")] == "12.5s"
