"""The validation-loss chart is a real PNG, also when some or all runs have no evaluation."""

from __future__ import annotations

from pathlib import Path

import pytest
from report_fakes import SHARED, make_run, make_sweep, train_record

from lmpt.report.plot import plot_val_curves
from lmpt.report.runs import find_runs

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def assert_png(path: Path) -> None:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    assert len(data) > 1000


@pytest.mark.parametrize("log_y", [False, True])
def test_curves_of_a_sweep(tmp_path: Path, log_y: bool) -> None:
    plot_val_curves(find_runs([make_sweep(tmp_path)]), tmp_path / "val.png", log_y=log_y)
    assert_png(tmp_path / "val.png")


def test_no_evaluations_still_writes_a_chart(tmp_path: Path) -> None:
    make_run(tmp_path / "0", [*SHARED], [train_record(10, 6.0, 100.0)])
    plot_val_curves(find_runs([tmp_path]), tmp_path / "val.png")
    assert_png(tmp_path / "val.png")
