"""A sweep's summary files, written directly and by the Hydra callback at the end of a multirun."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from omegaconf import OmegaConf
from report_fakes import make_sweep

from lmpt.report.sweep import SweepSummary, summarize_sweep

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def test_summarize_sweep_prints_and_writes_three_files(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    sweep = make_sweep(tmp_path)
    runs = summarize_sweep(sweep)
    assert len(runs) == 5
    out = capsys.readouterr().out
    assert "optimizer.lr=0.003 objective=ul2-mixture" in out and "val_loss/R3-0.15" in out
    assert "all runs: tokenizer.vocab_size=1024" in out
    with open(sweep / "summary.csv", newline="") as f:
        assert [row["status"] for row in csv.DictReader(f)] == [
            "completed",
            "completed",
            "failed: optimizer.lr=bad: not a number",
            "incomplete",
            "preempted",
        ]
    assert "| optimizer.lr=0.001 | clm | completed | 30 | 6.3000 |" in (sweep / "summary.md").read_text()
    assert (sweep / "val_loss.png").read_bytes()[:8] == PNG_SIGNATURE


def test_callback_summarizes_the_sweep_dir(tmp_path: Path) -> None:
    sweep = make_sweep(tmp_path)
    config = OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep), "subdir": "${hydra.job.num}"}}})
    SweepSummary().on_multirun_end(config=config, config_name="config")
    assert all((sweep / name).stat().st_size > 0 for name in ("summary.csv", "summary.md", "val_loss.png"))


def test_callback_on_a_sweep_without_runs_only_warns(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    SweepSummary().on_multirun_end(config=OmegaConf.create({"hydra": {"sweep": {"dir": str(tmp_path)}}}))
    assert "sweep summary skipped: no run directories" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []
