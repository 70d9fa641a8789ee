"""lmpt-compare and sweep tables rank clm and mdlm runs together by held-out bits per token (val_bits_per_token),
saying that the diffusion figures are upper bounds; tables without a bound rank as before."""

from __future__ import annotations

from pathlib import Path

from report_fakes import SHARED, eval_record, make_run

from lmpt.report.ranking import rank_runs
from lmpt.report.runs import find_runs


def test_clm_and_mdlm_rank_by_bits_per_token_and_the_header_names_the_bound(tmp_path: Path) -> None:
    runs = (("0", "clm", 5.0, 7.3), ("1", "mdlm", 6.5, 7.1), ("2", "mdlm", 6.0, 7.6))
    for name, objective, loss, bits in runs:
        record = eval_record(10, loss, val_bits_per_token=bits, val_bits_per_token_stderr=0.005)
        make_run(tmp_path / "a" / name, SHARED, [record], objective=objective)
    ranked, ranking = rank_runs(find_runs([tmp_path / "a"]))
    assert ranking.key == "val_bits_per_token"
    assert "mdlm figures are upper bounds" in ranking.header and "bound" in ranking.label
    assert [r.path.name for r in ranked] == ["1", "0", "2"]  # by bits, not by each objective's own val_loss


def test_clm_runs_alone_keep_their_ranking(tmp_path: Path) -> None:
    for name, loss in (("0", 5.0), ("1", 4.0)):
        record = eval_record(10, loss, val_bits_per_token=loss / 0.693)
        make_run(tmp_path / "a" / name, SHARED, [record], objective="clm")
    ranked, ranking = rank_runs(find_runs([tmp_path / "a"]))
    assert ranking.key == "val_loss" and [r.path.name for r in ranked] == ["1", "0"]


def test_an_mdlm_run_without_the_figure_leaves_the_table_unranked_by_it(tmp_path: Path) -> None:
    make_run(tmp_path / "a" / "0", SHARED, [eval_record(10, 5.0, val_bits_per_token=7.0)], objective="clm")
    make_run(tmp_path / "a" / "1", SHARED, [eval_record(10, 6.0)], objective="mdlm")
    _, ranking = rank_runs(find_runs([tmp_path / "a"]))
    assert ranking.key != "val_bits_per_token"


def test_the_chart_plots_the_bits_it_ranks_by(tmp_path: Path) -> None:
    make_run(tmp_path / "a" / "0", SHARED, [eval_record(10, 5.0, val_bits_per_token=7.0)], objective="clm")
    make_run(tmp_path / "a" / "1", SHARED, [eval_record(10, 6.0, val_bits_per_token=6.5)], objective="mdlm")
    ranked, ranking = rank_runs(find_runs([tmp_path / "a"]))
    assert [ranking.curve(r) for r in ranked] == [[(10, 6.5)], [(10, 7.0)]]
