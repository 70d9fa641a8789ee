"""A sweep ranked by a downstream figure draws that figure per run with its 95% interval (ranking.png, named in
summary.md); a sweep whose runs evaluated once draws points, not lines, in val_loss.png, and says why."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from report_fakes import SHARED, eval_record, fine_tuned_run, make_run, make_sweep, train_record

from lmpt.downstream.significance import seed_interval
from lmpt.report import ranking_plot
from lmpt.report.plot import ONCE_NOTE, draw_val_curves
from lmpt.report.ranking import rank_runs
from lmpt.report.ranking_plot import RankingChart, draw_ranking
from lmpt.report.runs import find_runs
from lmpt.report.sweep import summarize_sweep

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SEEDS = {"clm": [0.70, 0.72, 0.71], "mlm": [0.85, 0.86, 0.84], "span": [0.60, 0.66, 0.63]}
SCRATCH = {"clm": 0.55, "mlm": 0.58, "span": 0.52}


@pytest.fixture
def charts(monkeypatch: pytest.MonkeyPatch) -> list[RankingChart]:
    """Every chart the report hands to plot_ranking (which still writes it)."""
    seen: list[RankingChart] = []
    real = ranking_plot.plot_ranking

    def spy(chart: RankingChart, path: Path, title: str) -> None:
        seen.append(chart)
        real(chart, path, title)

    monkeypatch.setattr(ranking_plot, "plot_ranking", spy)
    return seen


def test_a_sweep_ranked_by_a_fine_tuned_figure_plots_it_with_the_records_intervals(tmp_path: Path, charts) -> None:
    sweep = tmp_path / "sweep"
    for job, objective in enumerate(SEEDS):
        fine_tuned_run(sweep / str(job), objective, SEEDS[objective], (0.1, 0.05, 0.15), SCRATCH[objective])
    summarize_sweep(sweep)

    assert (sweep / "ranking.png").read_bytes()[:8] == PNG_SIGNATURE
    (chart,) = charts
    assert chart.figure == "order/accuracy_mean"
    assert chart.labels == ["objective=mlm", "objective=clm", "objective=span"]  # rank order, shortened overrides
    for objective, value, interval in zip(["mlm", "clm", "span"], chart.values, chart.intervals, strict=True):
        assert value == pytest.approx(np.mean(SEEDS[objective]))
        assert interval == pytest.approx(seed_interval(SEEDS[objective]))  # the t interval over the record's seeds
    majority, scratch = chart.references
    assert (majority.name, majority.shared) == ("majority class", 0.5)
    assert scratch.name == "scratch control" and scratch.shared is None
    assert scratch.values == [SCRATCH["mlm"], SCRATCH["clm"], SCRATCH["span"]]

    fig = draw_ranking(chart, "title")
    ax = fig.axes[0]
    (bars,) = ax.containers
    points, _, (whiskers,) = bars.lines
    assert list(points.get_xdata()) == pytest.approx(chart.values) and list(points.get_ydata()) == [0, 1, 2]
    drawn = [(segment[0][0], segment[1][0]) for segment in whiskers.get_segments()]
    assert np.allclose(drawn, chart.intervals)
    assert [t.get_text() for t in ax.get_yticklabels()] == chart.labels
    assert ax.get_ylim()[0] > ax.get_ylim()[1]  # the best run on top
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert list(lines["majority class 0.500"].get_xdata()) == [0.5, 0.5]
    assert list(lines["scratch control"].get_xdata()) == scratch.values

    markdown = (sweep / "summary.md").read_text()
    assert "![ranking.png](ranking.png)" in markdown and "![val_loss.png](val_loss.png)" in markdown


def test_a_zero_shot_ranking_draws_chance_and_a_run_without_an_interval_apart(tmp_path: Path, charts) -> None:
    for job, (accuracy, interval) in enumerate([(0.40, (0.35, 0.45)), (0.30, None)]):
        logged = {"step": 10, "downstream/cloze/accuracy": accuracy, "downstream/cloze/chance": 0.25}
        records = [train_record(10, 5.2, 4000.0), eval_record(10, 5.0), logged]
        path = make_run(tmp_path / str(job), [*SHARED, f"optimizer.lr={job}"], records, status={"status": "completed"})
        record = {"task": "cloze", "accuracy": accuracy}
        if interval is not None:
            record |= {"accuracy_low": interval[0], "accuracy_high": interval[1]}
        (path / "downstream").mkdir()
        (path / "downstream" / "cloze.json").write_text(json.dumps(record))
    summarize_sweep(tmp_path)
    (chart,) = charts
    assert chart.values == [0.40, 0.30] and chart.intervals == [(0.35, 0.45), None]
    assert [(r.name, r.shared) for r in chart.references] == [("chance", 0.25)]
    fig = draw_ranking(chart, "title")
    lines = {line.get_label(): line for line in fig.axes[0].get_lines()}
    assert list(lines["cloze/accuracy (no interval in its record)"].get_xdata()) == [0.30]
    assert list(lines["chance 0.250"].get_xdata()) == [0.25, 0.25]


def test_a_loss_ranking_writes_no_ranking_chart(tmp_path: Path, charts) -> None:
    sweep = make_sweep(tmp_path)
    summarize_sweep(sweep)
    assert charts == [] and not (sweep / "ranking.png").exists()
    assert "ranking.png" not in (sweep / "summary.md").read_text()


def test_runs_evaluated_once_are_points_with_a_note_and_curves_stay_lines(tmp_path: Path) -> None:
    for job, loss in enumerate([5.0, 4.5]):
        make_run(
            tmp_path / "once" / str(job),
            [*SHARED, f"optimizer.lr={job}"],
            [train_record(10, loss + 0.2, 4000.0), eval_record(20, loss)],
        )
    runs, ranking = rank_runs(find_runs([tmp_path / "once"]))
    fig = draw_val_curves(runs, ranking=ranking)
    lines = fig.axes[0].get_lines()
    assert len(lines) == 2 and all(line.get_linestyle() == "None" and line.get_marker() == "o" for line in lines)
    assert sorted(float(line.get_ydata()[0]) for line in lines) == [4.5, 5.0]
    assert ONCE_NOTE in fig.texts[0].get_text()  # the suptitle

    fig = draw_val_curves(find_runs([make_sweep(tmp_path / "curves")]))
    styles = {line.get_label(): line.get_linestyle() for line in fig.axes[0].get_lines()}
    assert styles["optimizer.lr=0.001"] == "-" and styles["optimizer.lr=0.01"] == "None"  # 3 evaluations; 1
    assert ONCE_NOTE not in fig.texts[0].get_text()


def test_a_zero_shot_ranking_draws_each_runs_control_and_its_csv_carries_the_control_and_gain(
    tmp_path: Path, charts
) -> None:
    """mlm ranks first at 0.512 while its own control scored 0.532: the chart and ranking.csv both say so."""
    for job, (objective, accuracy, control) in enumerate([("mlm", 0.512, 0.532), ("clm", 0.480, 0.470)]):
        gain = accuracy - control
        logged = {
            "step": 10,
            "downstream/cloze/accuracy": accuracy,
            "downstream/cloze/chance": 0.25,
            "downstream/cloze/scratch_accuracy": control,
            "downstream/cloze/accuracy_gain": gain,
        }
        records = [train_record(10, 5.2, 4000.0), eval_record(10, 5.0), logged]
        path = make_run(
            tmp_path / str(job),
            [*SHARED, f"objective={objective}"],
            records,
            objective=objective,
            status={"status": "completed"},
        )
        entry = {"pretrained": accuracy, "scratch": control, "gain": gain, "interval": [gain - 0.03, gain + 0.03]}
        interval = {"accuracy_low": accuracy - 0.04, "accuracy_high": accuracy + 0.04}
        record = {
            "task": "cloze",
            "accuracy": accuracy,
            **interval,
            "scratch": {"accuracy": control},
            "gain": {"accuracy": entry},
        }
        (path / "downstream").mkdir()
        (path / "downstream" / "cloze.json").write_text(json.dumps(record))
    summarize_sweep(tmp_path)
    (chart,) = charts
    assert chart.labels == ["objective=mlm", "objective=clm"]
    references = {r.name: r for r in chart.references}
    assert references["scratch control"].values == [0.532, 0.470]  # a mark on each run's row
    fig = draw_ranking(chart, "title")
    marks = {line.get_label(): line for line in fig.axes[0].get_lines()}["scratch control"]
    assert list(marks.get_xdata()) == [0.532, 0.470] and list(marks.get_ydata()) == [0, 1]
    with open(tmp_path / "summary.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [float(r["cloze/accuracy_control"]) for r in rows] == [0.532, 0.470]
    assert [float(r["cloze/accuracy_gain"]) for r in rows] == pytest.approx([-0.020, 0.010])
    assert float(rows[0]["cloze/accuracy_gain_low"]) == pytest.approx(-0.050)
    assert float(rows[0]["cloze/accuracy_gain_high"]) == pytest.approx(0.010)
