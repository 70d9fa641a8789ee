"""lmpt-compare ranks clm and mtp runs together: an mtp run's val_loss is its main head's next-token loss on the
same windows, clm's task; fim's val_loss (rearranged documents) is not, so a table with it stays unranked."""

from __future__ import annotations

from pathlib import Path

from report_fakes import SHARED, eval_record, make_run

from lmpt.report.ranking import rank_runs
from lmpt.report.runs import find_runs


def test_clm_and_mtp_rank_by_val_loss_fim_beside_them_does_not(tmp_path: Path) -> None:
    for name, objective, loss in (("0", "clm", 6.0), ("1", "mtp", 5.0), ("2", "mtp", 5.5)):
        make_run(tmp_path / "a" / name, SHARED, [eval_record(10, loss)], objective=objective)
    ranked, ranking = rank_runs(find_runs([tmp_path / "a"]))
    assert ranking.key == "val_loss" and "mtp runs' main head" in ranking.header
    assert [r.path.name for r in ranked] == ["1", "2", "0"]
    make_run(tmp_path / "a" / "3", SHARED, [eval_record(10, 1.0)], objective="fim")
    ranked, ranking = rank_runs(find_runs([tmp_path / "a"]))
    assert ranking.key is None and ranking.header.startswith("not ranked")
