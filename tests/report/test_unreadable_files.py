"""lmpt-compare names what it cannot read, in one line each, and never takes it for something it is not: a status.json
that does not parse is not a completed run, a metrics line cut short is named, a downstream record that is not JSON is
named and left out."""

from __future__ import annotations

from pathlib import Path

from report_fakes import SHARED, eval_record, make_run, train_record

from lmpt.downstream.records import task_record
from lmpt.report.runs import UNREADABLE, find_runs


def test_a_corrupt_status_a_cut_metrics_line_and_a_broken_record_are_each_named(tmp_path: Path, capsys) -> None:
    run = make_run(tmp_path / "a", SHARED, [train_record(10, 5.0, 1000.0), eval_record(10, 5.0)])
    (run / "status.json").write_text('{"status": "compl')
    with (run / "metrics.jsonl").open("a") as metrics:
        metrics.write('{"step": 20, "downstream/blimp-fast/accura')
    (run / "downstream").mkdir()
    (run / "downstream" / "blimp-fast.json").write_text("{not json")
    (summary,) = find_runs([tmp_path])
    assert summary.status == UNREADABLE  # a final model is there, but a status that cannot be read is no "completed"
    assert task_record(run, "blimp-fast") is None
    said = capsys.readouterr()
    err = said.out + said.err
    assert "status.json cannot be read" in err
    assert "line 3 is not a whole JSON record" in err
    assert "blimp-fast.json is not a readable record" in err
