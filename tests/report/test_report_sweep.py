"""A sweep's summary files, written directly and by the Hydra callback at the end of a multirun."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from omegaconf import OmegaConf
from report_fakes import make_sweep

from lmpt.report.sweep import SweepSummary, summarize_sweep, unfinished_jobs_in

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


def test_callback_on_a_sweep_whose_jobs_left_no_folder_leaves_nothing(tmp_path: Path, capsys) -> None:
    """Every job a dry run: the sweep's folder held Hydra's multirun.yaml alone, and goes, without a word."""
    sweep = tmp_path / "multirun" / "2026-12-07" / "08-00-00"
    sweep.mkdir(parents=True)
    (sweep / "multirun.yaml").write_text("hydra: {}\n")
    SweepSummary().on_multirun_end(config=OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep)}}}))
    assert capsys.readouterr().out == "" and not sweep.exists()


def test_callback_on_a_sweep_without_readable_runs_only_warns(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "0").mkdir()  # a job's folder with nothing lmpt wrote in it
    SweepSummary().on_multirun_end(config=OmegaConf.create({"hydra": {"sweep": {"dir": str(tmp_path)}}}))
    assert "sweep summary skipped: no run directories" in capsys.readouterr().out


def test_unfinished_jobs_are_read_from_each_jobs_status(tmp_path: Path) -> None:
    """Whatever process or machine ran a job, its status.json says how it ended; completed jobs do not count."""
    from lmpt.rundir.directory import write_status

    endings = [
        ("completed", {}),
        ("failed", {"user_error": True}),
        ("failed", {"user_error": False}),
        ("preempted", {"error": "did not requeue the job"}),
        ("failed", {}),
    ]
    for job, (status, fields) in enumerate(endings):
        (tmp_path / str(job)).mkdir()
        write_status(tmp_path / str(job), status, **fields)
    (tmp_path / ".submitit").mkdir()  # not a job
    assert sorted(unfinished_jobs_in(tmp_path)) == ["bad input", "error", "error", "stopped"]


@pytest.mark.parametrize(
    ("unfinished", "code", "lines"),
    [
        ([], None, []),
        (["bad input", "bad input"], 2, ["2 sweep job(s) failed"]),
        (["stopped"], 75, ["1 sweep job(s) stopped with a checkpoint"]),
        (["bad input", "error"], 1, ["2 sweep job(s) failed"]),
        (["bad input", "stopped"], 1, ["1 sweep job(s) failed", "1 sweep job(s) stopped"]),
    ],
)
def test_a_sweeps_exit_code_says_how_its_unfinished_jobs_ended(
    unfinished: list[str], code: int | None, lines: list[str], monkeypatch, capsys: pytest.CaptureFixture
) -> None:
    from lmpt import app
    from lmpt.report import sweep

    monkeypatch.setattr(sweep, "unfinished_jobs", unfinished)
    if code is None:
        app._exit_for_unfinished_jobs()
    else:
        with pytest.raises(SystemExit) as exited:
            app._exit_for_unfinished_jobs()
        assert exited.value.code == code
    err = capsys.readouterr().err
    assert all(line in err for line in lines) and len(err.splitlines()) == len(lines), err
