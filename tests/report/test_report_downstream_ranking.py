"""Runs of different objectives rank by a downstream figure when every completed run has it, and only then."""

from __future__ import annotations

from pathlib import Path

from report_fakes import SHARED, eval_record, make_run, train_record

from lmpt.report.compare import compare
from lmpt.report.ranking import rank_runs
from lmpt.report.runs import find_runs


def objective_run(path: Path, objective: str, val_loss: float, downstream: dict[str, float], status="completed"):
    records = [train_record(10, val_loss + 0.2, 4000.0), eval_record(10, val_loss)]
    if downstream:
        records.append({"step": 10, **{f"downstream/{k}": v for k, v in downstream.items()}})
    make_run(path, [*SHARED, f"objective={objective}"], records, objective=objective, status={"status": status})


def test_a_zero_shot_accuracy_ranks_before_a_fine_tuned_one_as_a_study_ranks(tmp_path: Path) -> None:
    """One ranking rule (issue 63, point 12): lmpt-compare picks the task a study ranks by, the zero-shot one."""
    objective_run(tmp_path / "0", "clm", 4.0, {"order/accuracy_mean": 0.61, "cloze/accuracy": 0.40})
    objective_run(tmp_path / "1", "mlm", 2.0, {"order/accuracy_mean": 0.74, "cloze/accuracy": 0.30})
    ranked, ranking = rank_runs(find_runs([tmp_path]))
    assert ranking.key == "downstream/cloze/accuracy" and [r.objective for r in ranked] == ["clm", "mlm"]


def test_a_fine_tuned_accuracy_ranks_objectives_best_first(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    objective_run(sweep / "0", "clm", 4.0, {"order/accuracy_mean": 0.61, "cloze/accuracy": 0.40})
    objective_run(sweep / "1", "mlm", 2.0, {"order/accuracy_mean": 0.74})  # lowest loss; no zero-shot figure
    objective_run(sweep / "2", "span", 3.0, {"order/accuracy_mean": 0.66, "cloze/accuracy": 0.35})
    ranked, ranking = rank_runs(find_runs([sweep]))
    assert [r.objective for r in ranked] == ["mlm", "span", "clm"]  # highest first; losses play no part
    assert ranking.key == "downstream/order/accuracy_mean" and ranking.higher_is_better
    assert ranking.header.startswith("ranked by downstream/order/accuracy_mean (higher is better)")

    compare([sweep], tmp_path / "report")
    markdown = (tmp_path / "report" / "compare.md").read_text().splitlines()
    assert markdown[2].startswith("Ranked by downstream/order/accuracy_mean (higher is better)")
    header = markdown[4]
    assert "| cloze/accuracy | order/accuracy_mean |" in header
    assert [line.split(" | ")[1] for line in markdown[6:] if line.startswith("|")] == ["mlm", "span", "clm"]
    assert "| 0.7400 |" in markdown[6]


def test_a_zero_shot_figure_ranks_when_no_run_was_fine_tuned(tmp_path: Path) -> None:
    objective_run(tmp_path / "0", "clm", 4.0, {"cloze/accuracy": 0.40, "cloze/accuracy_norm": 0.20})
    objective_run(tmp_path / "1", "prefix", 3.0, {"cloze/accuracy": 0.45, "cloze/accuracy_norm": 0.10})
    ranked, ranking = rank_runs(find_runs([tmp_path]))
    assert ranking.key == "downstream/cloze/accuracy" and [r.objective for r in ranked] == ["prefix", "clm"]


def test_without_the_figure_in_every_completed_run_nothing_ranks_across_objectives(tmp_path: Path) -> None:
    objective_run(tmp_path / "0", "clm", 4.0, {"cloze/accuracy": 0.40})
    objective_run(tmp_path / "1", "span", 3.0, {})
    ranked, ranking = rank_runs(find_runs([tmp_path]))
    assert ranking.key is None and [r.objective for r in ranked] == ["clm", "span"]


def test_a_failed_run_does_not_stop_the_others_ranking(tmp_path: Path) -> None:
    objective_run(tmp_path / "0", "clm", 4.0, {"cloze/accuracy": 0.30})
    objective_run(tmp_path / "1", "span", 3.0, {}, status="failed")
    objective_run(tmp_path / "2", "mlm", 3.0, {"cloze/accuracy": 0.35})
    ranked, ranking = rank_runs(find_runs([tmp_path]))
    assert ranking.key == "downstream/cloze/accuracy"
    assert [r.objective for r in ranked] == ["mlm", "clm", "span"]  # the run without the figure comes last
