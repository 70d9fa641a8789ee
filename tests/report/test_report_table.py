"""The runs table: its rows and values on the console, in CSV and in Markdown."""

from __future__ import annotations

import csv
from pathlib import Path

from report_fakes import SHARED, make_sweep
from rich.console import Console

from lmpt.report.runs import find_runs
from lmpt.report.table import formatted_rows, run_labels, runs_table, write_csv, write_markdown

HEADER = [
    "run",
    "objective",
    "status",
    "step",
    "val_loss",
    "val_ppl",
    "val_acc",
    "val_loss/R3-0.15",
    "val_loss/S",
    "tokens_per_s",
    "loss_tokens_per_s",
    "flops",
    "wall_s",
]


def test_labels_keep_only_what_differs(tmp_path: Path) -> None:
    labels, common = run_labels(find_runs([make_sweep(tmp_path)]))
    assert common == SHARED
    assert labels == [
        "optimizer.lr=0.001",
        "optimizer.lr=0.003 objective=ul2-mixture",
        "optimizer.lr=bad",
        "optimizer.lr=0.01",
        "optimizer.lr=0.03",
    ]


def test_rows_hold_each_runs_values_and_blanks_where_a_measure_is_missing(tmp_path: Path) -> None:
    header, rows = formatted_rows(find_runs([make_sweep(tmp_path)]))
    assert header == HEADER
    by_run = {row[0]: dict(zip(header, row, strict=True)) for row in rows}
    first = by_run["optimizer.lr=0.001"]
    assert first == {
        **first,
        "objective": "clm",
        "status": "completed",
        "step": "30",
        "val_loss": "6.3000",  # the last evaluation's, not the best or the first
        "val_ppl": "544.57",
        "val_acc": "0.0400",
        "val_loss/R3-0.15": "",
        "tokens_per_s": "8.0k",
        "wall_s": "12.5s",
    }
    assert by_run["optimizer.lr=0.003 objective=ul2-mixture"]["val_loss/S"] == "5.7000"
    assert by_run["optimizer.lr=0.003 objective=ul2-mixture"]["wall_s"] == "1m15s"
    failed = by_run["optimizer.lr=bad"]
    assert failed["status"] == "failed: optimizer.lr=bad: not a number"
    assert [failed[k] for k in ("step", "val_loss", "val_ppl", "tokens_per_s")] == ["", "", "", ""]
    assert by_run["optimizer.lr=0.01"]["status"] == "incomplete"
    assert by_run["optimizer.lr=0.03"]["status"] == "preempted"


def test_rich_table_shows_every_run(tmp_path: Path) -> None:
    console = Console(width=250, record=True, file=open(tmp_path / "out.txt", "w"))
    console.print(runs_table(find_runs([make_sweep(tmp_path)]), title="sweep"))
    console.file.close()
    text = console.export_text()
    assert all(title in text for title in HEADER)
    assert "optimizer.lr=0.003 objective=ul2-mixture" in text
    assert "failed: optimizer.lr=bad: not a number" in text
    assert "6.3000" in text and "5.9000" in text


def test_csv_has_the_same_columns_at_full_precision(tmp_path: Path) -> None:
    runs = find_runs([make_sweep(tmp_path)])
    write_csv(runs, tmp_path / "runs.csv")
    with open(tmp_path / "runs.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == [*HEADER, "overrides", "path"]
    assert [r["run"] for r in rows] == run_labels(runs)[0]
    assert float(rows[0]["val_loss"]) == 6.3
    assert float(rows[0]["wall_s"]) == 12.5
    assert rows[0]["overrides"] == " ".join([*SHARED, "optimizer.lr=0.001"])
    assert rows[1]["val_loss/R3-0.15"] == "6.0"
    assert rows[0]["val_loss/R3-0.15"] == ""
    assert rows[2]["status"] == "failed: optimizer.lr=bad: not a number"
    assert Path(rows[3]["path"]).name == "3"


def test_markdown_table(tmp_path: Path) -> None:
    write_markdown(find_runs([make_sweep(tmp_path)]), tmp_path / "runs.md")
    lines = (tmp_path / "runs.md").read_text().splitlines()
    assert lines[0] == f"All runs: `{' '.join(SHARED)}`"
    assert lines[2] == "| " + " | ".join(HEADER) + " |"
    assert lines[3] == "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    assert lines[4] == (
        "| optimizer.lr=0.001 | clm | completed | 30 | 6.3000 | 544.57 | 0.0400 |  |  | 8.0k | 8.0k |  | 12.5s |"
    )
    assert len(lines) == 4 + 5
