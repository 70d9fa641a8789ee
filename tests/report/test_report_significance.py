"""Significance: the paired tests and Holm's correction on hand-made results, and a ranked table from fake runs that
shows each figure's interval, marks the gaps between neighbours and says when the top runs cannot be told apart."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from report_fakes import SHARED, eval_record, make_run, train_record
from scipy import stats

from lmpt.downstream.significance import decode_outcomes, encode_outcomes, holm, mcnemar_exact, seed_interval, welch_t
from lmpt.report.compare import compare
from lmpt.report.ranking import rank_runs
from lmpt.report.runs import find_runs
from lmpt.report.significance import neighbour_significance

N = 300


def outcomes(right: int, flipped: range = range(0)) -> np.ndarray:
    """The first `right` of N items right, then the `flipped` items made wrong."""
    correct = np.arange(N) < right
    correct[list(flipped)] = False
    return correct


def test_mcnemar_finds_a_clear_difference_and_none_between_identical_runs() -> None:
    better, worse = outcomes(210), outcomes(210, range(100, 175))
    assert mcnemar_exact(better, worse) < 1e-15  # 75 items right only in `better`, none the other way
    assert mcnemar_exact(better, better) == 1.0
    assert mcnemar_exact(better, outcomes(210, range(3))) == pytest.approx(0.25)  # 3 discordant: 2 * 0.5**3
    with pytest.raises(ValueError, match="same items"):
        mcnemar_exact(better, better[:-1])


def test_welch_over_seeds_and_the_t_interval() -> None:
    high, low = [0.80, 0.82, 0.81], [0.60, 0.63, 0.61]
    p = welch_t(high, low)
    assert p == pytest.approx(stats.ttest_ind(high, low, equal_var=False).pvalue) and p < 0.01
    assert welch_t(high, high) == 1.0 and welch_t([0.7, 0.7], [0.6, 0.6]) == 0.0 and welch_t([0.8], low) is None
    lo, hi = seed_interval(high)
    half = stats.t.ppf(0.975, 2) * np.std(high, ddof=1) / np.sqrt(3)
    assert (lo, hi) == pytest.approx((0.81 - half, 0.81 + half)) and seed_interval([0.8]) is None


def test_holm_changes_a_borderline_call() -> None:
    raw = [0.03, 0.04, 0.5]
    assert all(p < 0.05 for p in raw[:2])  # uncorrected, two gaps would count as real
    assert holm(raw) == pytest.approx([0.09, 0.09, 0.5])  # 3 x 0.03, then max(0.09, 2 x 0.04), then 0.5
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.01]) == [0.01]


def test_outcomes_round_trip_as_one_string() -> None:
    correct = outcomes(5, range(1, 2))[:8]
    assert encode_outcomes(correct) == "10111000"
    assert (decode_outcomes("10111000") == correct).all()
    assert decode_outcomes([1, 0]) is None and decode_outcomes("") is None and decode_outcomes("12") is None


def zero_shot_run(path: Path, name: str, correct: np.ndarray | None, logged: float | None = None) -> None:
    """A completed clm run that scored the task `cloze` zero-shot: metrics.jsonl's figures and the record."""
    accuracy = float(correct.mean()) if correct is not None else logged
    figures = {"downstream/cloze/accuracy": logged or accuracy, "downstream/cloze/chance": 0.25}
    records = [train_record(10, 5.2, 4000.0), eval_record(10, 5.0), {"step": 10, **figures}]
    make_run(path, [*SHARED, f"optimizer.lr={name}"], records, status={"status": "completed"})
    record = {"task": "cloze", "accuracy": accuracy, "n": N, "items_digest": "same-items"}
    if correct is not None:
        low, high = accuracy - 0.05, accuracy + 0.05  # what the scorer's bootstrap would put here
        record |= {"accuracy_low": low, "accuracy_high": high, "accuracy_items": encode_outcomes(correct)}
    (path / "downstream").mkdir()
    (path / "downstream" / "cloze.json").write_text(json.dumps(record))


def test_a_ranked_table_shows_intervals_marks_and_that_the_top_two_are_not_distinguishable(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    sweep = tmp_path / "sweep"
    zero_shot_run(sweep / "0", "0.003", outcomes(210, range(100, 175)))  # 0.45
    zero_shot_run(sweep / "1", "0.001", outcomes(210))  # 0.70
    zero_shot_run(sweep / "2", "0.002", outcomes(210, range(3)))  # 0.69: 3 items apart from the best
    compare([sweep], tmp_path / "report")
    out = capsys.readouterr().out
    table = out[: out.index("The top 2")]
    assert max(len(line) for line in table.splitlines() if "│" in line) <= 160  # the title may run longer, whole
    assert "cloze/accuracy [95%]" in table and "vs next" in table and "chance" in table
    assert "0.700 [0.650, 0.750]" in table and "0.690 [0.640, 0.740]" in table
    assert "≈ p=0.25" in table and "> p=" in table
    assert "val_acc" not in table and "more columns in compare.csv and compare.md: " in out and "val_acc" in out
    verdict = "The top 2 are not distinguishable at 95% (Holm-corrected McNemar p=0.25)."
    assert verdict in out and "1 of 2 tested gaps between neighbours are significant" in out

    markdown = (tmp_path / "report" / "compare.md").read_text().splitlines()
    assert markdown[2].startswith("Ranked by downstream/cloze/accuracy (higher is better)") and verdict in markdown[2]
    assert markdown[4].endswith("| cloze/accuracy_high | vs_next | vs_next_test | vs_next_holm_p |")
    rows = [line.split(" | ")[0] for line in markdown[6:] if line.startswith("|")]
    assert rows == ["| optimizer.lr=0.001", "| optimizer.lr=0.002", "| optimizer.lr=0.003"]
    rows = list(csv.DictReader((tmp_path / "report" / "compare.csv").open()))
    assert [r["vs_next_test"] for r in rows] == ["McNemar", "McNemar", ""]
    assert float(rows[0]["vs_next_holm_p"]) == pytest.approx(0.25) and float(rows[1]["vs_next_holm_p"]) < 1e-10
    assert float(rows[0]["cloze/accuracy_low"]) == pytest.approx(0.65)


def test_a_clear_leader_and_runs_without_per_item_results(tmp_path: Path) -> None:
    zero_shot_run(tmp_path / "0", "0.001", outcomes(210))
    zero_shot_run(tmp_path / "1", "0.002", outcomes(210, range(100, 175)))
    zero_shot_run(tmp_path / "2", "0.003", None, logged=0.30)  # a record from before per-item outcomes
    zero_shot_run(tmp_path / "3", "0.004", outcomes(45), logged=0.20)  # its record was replaced since it logged
    ranked, ranking = rank_runs(find_runs([tmp_path]))
    significance = neighbour_significance(ranked, ranking)
    assert significance is not None
    assert significance.verdict().startswith("The top run is ahead of the second at 95% (Holm-corrected McNemar p=")
    marks = [significance.gaps[id(r)].mark for r in ranked[:-1]]
    assert marks[0].startswith("> p=") and marks[1:] == ["?", "?"]
    assert significance.interval(ranked[2]) is None and significance.interval(ranked[3]) is None


def fine_tuned_run(path: Path, objective: str, per_seed: list[float]) -> None:
    figures = {
        "downstream/order/accuracy_mean": float(np.mean(per_seed)),
        "downstream/order/majority_accuracy": 0.5,
        "downstream/order/scratch_accuracy_mean": 0.66,
    }
    records = [train_record(10, 5.2, 4000.0), eval_record(10, 5.0), {"step": 10, **figures}]
    make_run(path, [*SHARED, f"objective={objective}"], records, objective=objective, status={"status": "completed"})
    record = {
        "task": "order",
        "accuracy_mean": figures["downstream/order/accuracy_mean"],
        "per_seed": [{"seed": i, "accuracy": a, "macro_f1": a} for i, a in enumerate(per_seed)],
    }
    (path / "downstream").mkdir()
    (path / "downstream" / "order.json").write_text(json.dumps(record))


def test_fine_tuned_figures_carry_a_t_interval_and_welch_tests(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    fine_tuned_run(tmp_path / "0", "clm", [0.70, 0.72, 0.71])
    fine_tuned_run(tmp_path / "1", "mlm", [0.85, 0.86, 0.84])
    fine_tuned_run(tmp_path / "2", "span", [0.69, 0.73, 0.70])
    compare([tmp_path], tmp_path / "report")
    out = capsys.readouterr().out
    lo, hi = seed_interval([0.85, 0.86, 0.84])
    assert f"0.850 [{lo:.3f}, {hi:.3f}]" in out and "majority" in out and "scratch" in out and "0.660" in out
    assert "The top run is ahead of the second at 95% (Holm-corrected Welch t p=" in out
    assert "1 of 2 tested gaps" in out


def test_a_forged_figure_is_flagged_as_contradicted_by_its_record_not_merely_untested(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    zero_shot_run(tmp_path / "runs" / "0", "0.001", outcomes(210))  # 0.70, as its record says
    zero_shot_run(tmp_path / "runs" / "1", "0.002", outcomes(135), logged=0.95)  # the log says 0.95, its record 0.45
    compare([tmp_path / "runs"], tmp_path / "report")
    out = capsys.readouterr().out
    forged = tmp_path / "runs" / "1" / "downstream" / "cloze.json"
    (warning,) = [line for line in out.splitlines() if line.startswith("WARNING")]
    assert f"{forged}: record does not match the log (it holds accuracy 0.4500, metrics.jsonl logged 0.9500)" in warning
    row = next(line for line in out.splitlines() if "optimizer.lr=0.002" in line)
    assert "record does not match the log" in row  # on the forged run's own row, not a bare "untested"
    rows = list(csv.DictReader((tmp_path / "report" / "compare.csv").open()))
    assert [r["record"] for r in rows] == ["record does not match the log", ""]
    assert rows[0]["cloze/accuracy_low"] == "" and rows[0]["vs_next"] == "?"
    assert "The top 2 could not be tested against each other (a record does not match the log)." in out


def test_two_seeds_of_one_recipe_are_never_called_different() -> None:
    """ "clm seed 1 > clm seed 0" was once called significant from fine-tuning seeds alone (issue 63, point 12): the
    gap between two seeds of one recipe is not tested, and says why."""
    from dataclasses import replace

    from lmpt.report.runs import RunSummary
    from lmpt.report.significance import Evidence, tested_gaps

    base = RunSummary(Path("a"), "x", ["objective=clm", "trainer.seed=0"], "clm", "completed", 10, 4.0, 54.6, seed=0)
    other_seed = replace(base, path=Path("b"), overrides=["objective=clm", "trainer.seed=1"], seed=1)
    other_recipe = replace(base, path=Path("c"), overrides=["objective=clm", "optimizer.lr=0.1"], seed=0)
    far = {id(r): Evidence(seeds=np.array(v)) for r, v in ((base, [0.9, 0.91, 0.9]), (other_seed, [0.5, 0.5, 0.51]))}
    gaps = tested_gaps("downstream/t/accuracy_mean", [base, other_seed], far)
    assert gaps.gaps[id(base)].adjusted is None and "two seeds of one recipe" in gaps.gaps[id(base)].reason
    far[id(other_recipe)] = far.pop(id(other_seed))
    assert tested_gaps("downstream/t/accuracy_mean", [base, other_recipe], far).gaps[id(base)].significant
