"""`lmpt-compare`: runs and sweeps side by side, its files, its errors, and a real sweep end to end."""

from __future__ import annotations

import csv
import subprocess
from pathlib import Path

import pytest
from report_fakes import SHARED, eval_record, make_run, make_sweep, train_record
from runner import run_lmpt

from lmpt.report.compare import main

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def compare_command(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return run_lmpt(*args, cwd=cwd, command="lmpt-compare")


def compare_ok(argv: list[str]) -> None:
    """lmpt-compare's main with `argv`, ending as the command does: exit 0."""
    with pytest.raises(SystemExit) as ended:
        main(argv)
    assert ended.value.code == 0


def read_csv(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_a_run_dir_beside_a_sweep_dir(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    sweep = make_sweep(tmp_path / "a")
    single = make_run(
        tmp_path / "outputs" / "2026-11-22" / "09-00-00",
        ["model=small"],
        [train_record(10, 6.0, 2000.0), eval_record(10, 5.5)],
        status={"status": "completed", "wall_s": 3.0},
    )
    compare_ok([str(single), str(sweep), f"out={tmp_path / 'report'}"])
    rows = read_csv(tmp_path / "report" / "compare.csv")
    assert [Path(r["path"]).name for r in rows] == ["09-00-00", "0", "1", "2", "3", "10"]
    assert rows[0]["run"] == "model=small"  # nothing is shared between the single run and the sweep
    assert float(rows[0]["val_loss"]) == 5.5
    assert "| model=small | clm | completed | 10 | 5.5000 |" in (tmp_path / "report" / "compare.md").read_text()
    assert (tmp_path / "report" / "compare_val_loss.png").read_bytes()[:8] == PNG_SIGNATURE
    out = capsys.readouterr().out
    assert "6 runs" in out and "model=small" in out and "incomplete" in out


def test_out_defaults_to_the_current_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_run(tmp_path / "run", SHARED, [train_record(10, 6.0, 2000.0), eval_record(10, 5.5)])
    monkeypatch.chdir(tmp_path)
    compare_ok(["run"])
    assert {"compare.csv", "compare.md", "compare_val_loss.png"} <= {p.name for p in tmp_path.iterdir()}


def test_help(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    shown = capsys.readouterr().out
    assert "usage: lmpt-compare PATH... [key=value ...]" in shown and "out=" in shown and "log_y=" in shown


def test_the_old_flags_still_work_with_a_note(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """lmpt-compare took argparse flags before it read key=value options like lmpt's other commands."""
    make_run(tmp_path / "run", SHARED, [train_record(10, 6.0, 2000.0), eval_record(10, 5.5)])
    compare_ok([str(tmp_path / "run"), "--out", str(tmp_path / "old"), "--log-y"])
    assert (tmp_path / "old" / "compare.csv").is_file()
    shown = capsys.readouterr().out
    assert f"--out is now out={tmp_path / 'old'}; --log-y is now log_y=true" in " ".join(shown.split())


def test_missing_path_is_one_line_and_exit_2(tmp_path: Path) -> None:
    make_sweep(tmp_path)
    result = compare_command(str(tmp_path), "no/such/run", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "lmpt-compare: error: no/such/run does not exist: name a run directory or a directory that holds runs"
    ]
    assert not (tmp_path / "compare.csv").exists()


def test_real_sweep_then_compare(tmp_path: Path) -> None:
    """Two real lmpt jobs (tokenizer and token cache in the session's $LMPT_CACHE_DIR), then lmpt-compare."""
    sweep_dir = tmp_path / "sweep"
    overrides = [
        "tokenizer.vocab_size=1024",
        "data.seq_len=64",
        "trainer.batch_size=8",
        "trainer.max_steps=10",
        "trainer.eval_every=5",
        "trainer.progress=plain",
        "trainer.eval_batches=2",
        "trainer.sample_tokens=0",
        "optimizer.lr=1e-3,3e-3",
        f"hydra.sweep.dir={sweep_dir}",
    ]
    sweep = run_lmpt("-m", *overrides, cwd=tmp_path)
    assert sweep.returncode == 0, sweep.stderr[-2000:]

    result = compare_command(str(sweep_dir), "out=report", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    rows = read_csv(tmp_path / "report" / "compare.csv")
    assert sorted(r["run"] for r in rows) == ["optimizer.lr=0.001", "optimizer.lr=0.003"]
    assert [float(r["val_loss"]) for r in rows] == sorted(float(r["val_loss"]) for r in rows)  # best first
    assert "ranked by val_loss" in result.stdout
    for row in rows:
        assert row["status"] == "completed"
        assert row["step"] == "10"
        assert float(row["val_loss"]) > 0 and float(row["tokens_per_s"]) > 0
        assert float(row["loss_tokens_per_s"]) > 0 and float(row["flops"]) > 0
        last_eval = [
            line for line in (Path(row["path"]) / "metrics.jsonl").read_text().splitlines() if "val_loss" in line
        ]
        assert f'"val_loss": {row["val_loss"]}' in last_eval[-1]
    assert "optimizer.lr=0.003" in result.stdout and "val_acc" in result.stdout
    assert (tmp_path / "report" / "compare_val_loss.png").read_bytes()[:8] == PNG_SIGNATURE


def _bad_metrics(path: Path, bad: dict) -> None:
    """A completed run whose metrics.jsonl holds the record `bad` between two good ones."""
    make_run(
        path,
        [*SHARED, "optimizer.lr=0.001"],
        [train_record(10, 6.0, 2000.0), bad, eval_record(20, 5.5)],
        status={"status": "completed"},
    )


def _bad_task_record(path: Path) -> None:
    """A fine-tuned run whose record of its task (RUN/downstream/order.json) has per_seed: [1, 2]."""
    from report_fakes import fine_tuned_run

    fine_tuned_run(path, "clm", [0.70, 0.72])
    record = path / "downstream" / "order.json"
    record.write_text(record.read_text().replace('"per_seed": [{', '"per_seed": [1, 2], "was": [{'))


def _good_run(path: Path, fine_tuned: bool) -> None:
    """A run beside the bad one, of the same kind."""
    from report_fakes import fine_tuned_run

    if fine_tuned:
        fine_tuned_run(path, "mlm", [0.80, 0.82])
    else:
        make_run(path, [*SHARED, "optimizer.lr=0.003"], [eval_record(20, 5.0)], status={"status": "completed"})


@pytest.mark.parametrize(
    ("make_bad", "named", "problem"),
    [
        (lambda p: _bad_metrics(p, {"step": 15, "val_loss": "abc"}), "metrics.jsonl", '"val_loss" is "abc"'),
        (lambda p: _bad_metrics(p, {"step": "abc", "loss": 6.1}), "metrics.jsonl", '"step" is "abc"'),
        (_bad_task_record, "order.json", "record of the wrong type"),
    ],
    ids=["string figure", "string step", "per_seed of numbers"],
)
def test_a_record_of_the_wrong_type_is_one_line_naming_its_file_and_the_rest_is_compared(
    tmp_path: Path, capsys: pytest.CaptureFixture, make_bad, named: str, problem: str
) -> None:
    make_bad(tmp_path / "runs" / "bad")
    _good_run(tmp_path / "runs" / "good", fine_tuned=named == "order.json")
    compare_ok([str(tmp_path / "runs"), f"out={tmp_path / 'report'}"])  # the old code raised here (a traceback)
    out = capsys.readouterr().out
    warnings = [line for line in out.splitlines() if line.startswith("WARNING")]
    assert len(warnings) == 1 and named in warnings[0] and problem in warnings[0], out
    assert str(tmp_path / "runs" / "bad") in warnings[0]
    rows = read_csv(tmp_path / "report" / "compare.csv")
    assert len(rows) == 2 and {Path(r["path"]).name for r in rows} == {"bad", "good"}
    if named == "metrics.jsonl":
        bad = next(r for r in rows if Path(r["path"]).name == "bad")
        assert bad["val_loss"] == "5.5" and bad["step"] == "20"  # the good records of the run still count


def test_nothing_readable_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_run(tmp_path / "run", SHARED, [{"step": "abc", "loss": 6.0}, {"step": 10, "val_loss": "x"}])
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exited:
        main(["run"])
    assert exited.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        "lmpt-compare: error: nothing readable under run: every record of metrics.jsonl was of the wrong type "
        "(each file is named above); fix or move those records"
    ]
    assert not (tmp_path / "compare.csv").exists()


def test_a_run_read_in_part_is_said_not_shown_silently_empty(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """An empty metrics.jsonl and a missing config.yaml each get a line naming the run and what it lacks (issue
    63, point 25), and the rest is compared."""
    whole = make_run(tmp_path / "whole", ["model=tiny"], [train_record(10, 6.0, 2000.0), eval_record(10, 5.5)])
    empty = make_run(tmp_path / "empty", ["model=small"], [])
    unconfigured = make_run(tmp_path / "unconfigured", ["model=base"], [train_record(10, 6.0, 2000.0)])
    (unconfigured / "config.yaml").unlink()
    compare_ok([str(whole), str(empty), str(unconfigured), f"out={tmp_path / 'report'}"])
    out = " ".join(capsys.readouterr().out.split())
    assert f"{empty}: its metrics.jsonl holds no step yet" in out
    assert f"{unconfigured}: it has no config.yaml (its objective and settings are unknown" in out
    assert f"{whole}:" not in out
