"""A ranking by a fine-tuned figure whose runs gain nothing measurable over their from-scratch controls says that the
task does not measure pre-training at this scale (console, compare.md, a study's study.md); one significant gain, a
run without a control, or a record fine-tuned again since keeps it silent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from report_fakes import fine_tuned_run

from lmpt.report.compare import compare
from lmpt.report.control_gain import control_gain, within_noise_sentence
from lmpt.report.ranking import rank_runs
from lmpt.report.runs import find_runs
from lmpt.study.plan import StudyPlan
from lmpt.study.record import write_study
from lmpt.study.runs import read_final

SEEDS = {"clm": [0.70, 0.72, 0.71], "mlm": [0.62, 0.66, 0.64]}
NOISE = {"clm": (0.012, -0.020, 0.041), "mlm": (-0.01, -0.05, 0.03)}
SENTENCE = (
    "On order the best gain over the from-scratch control (+0.012 [-0.020, +0.041]) is within noise, as is every "
    "run's: this task does not measure pre-training at this scale."
)


def test_gains_within_noise_are_said_on_the_console_and_in_the_markdown(tmp_path: Path, capsys) -> None:
    for job, objective in enumerate(SEEDS):
        fine_tuned_run(tmp_path / "runs" / str(job), objective, SEEDS[objective], NOISE[objective])
    compare([tmp_path / "runs"], tmp_path / "report")
    assert SENTENCE in capsys.readouterr().out
    assert SENTENCE in (tmp_path / "report" / "compare.md").read_text().splitlines()


def test_one_run_is_the_gain_not_the_best_gain(tmp_path: Path) -> None:
    fine_tuned_run(tmp_path / "0", "clm", SEEDS["clm"], NOISE["clm"])
    ranked, ranking = rank_runs(find_runs([tmp_path]))
    assert within_noise_sentence(ranked, ranking) == (
        "On order the gain over the from-scratch control (+0.012 [-0.020, +0.041]) is within noise: this task does "
        "not measure pre-training at this scale."
    )


@pytest.mark.parametrize(
    "case",
    ["the best gain is significant", "a lower run's gain is significant", "a run without a control", "refined since"],
)
def test_a_significant_gain_or_an_unknown_one_says_nothing(tmp_path: Path, capsys, case: str) -> None:
    gains = dict(NOISE)
    if case == "the best gain is significant":
        gains["clm"] = (0.15, 0.10, 0.20)
    elif case == "a lower run's gain is significant":
        gains["mlm"] = (0.08, 0.01, 0.15)
    for job, objective in enumerate(SEEDS):
        without = case == "a run without a control" and objective == "mlm"
        fine_tuned_run(tmp_path / "runs" / str(job), objective, SEEDS[objective], None if without else gains[objective])
    if case == "refined since":  # fine-tuned again with other settings: the record no longer holds the logged figure
        record_path = tmp_path / "runs" / "0" / "downstream" / "order.json"
        record = json.loads(record_path.read_text())
        record["gain"]["accuracy"]["pretrained"] = 0.9
        record_path.write_text(json.dumps(record))
        assert control_gain(find_runs([tmp_path / "runs" / "0"])[0], "downstream/order/accuracy_mean") is None
    compare([tmp_path / "runs"], tmp_path / "report")
    assert "does not measure pre-training" not in capsys.readouterr().out
    assert "does not measure pre-training" not in (tmp_path / "report" / "compare.md").read_text()


def _study(tmp_path: Path, gains: dict[str, tuple[float, float, float]]) -> str:
    """study.md of a study whose final runs (one seed per objective) recorded `gains`."""
    directory = tmp_path / "study"
    plan = StudyPlan(
        objectives=list(SEEDS),
        seeds=[0],
        directory=directory,
        run_overrides=["downstream=shakespeare"],
        budgets=["1e12flops"],
        search_budget="1e11flops",
        search_steps={o: 10 for o in SEEDS},
        weights="last",
        space={},
        trials=1,
        sampler="random",
        search_seed=0,
        recipes=[],
        tasks=["order"],
    )
    for objective in SEEDS:
        fine_tuned_run(directory / "runs" / f"{objective}-seed0", objective, SEEDS[objective], gains[objective])
    finals = {o: [read_final(directory / "runs" / f"{o}-seed0", o, 0, "1e12flops", ["order"])] for o in SEEDS}
    write_study(plan, {}, finals)
    return (directory / "study.md").read_text()


def test_a_study_says_it_under_its_ranking_and_not_when_a_gain_is_significant(tmp_path: Path) -> None:
    markdown = _study(tmp_path / "noise", NOISE)
    ranking = markdown[markdown.index("## Final runs") :]  # the section that ranks the runs by the fine-tuned figure
    assert SENTENCE in ranking.splitlines()[2]
    assert (tmp_path / "noise" / "study" / "ranking.png").exists()
    assert "does not measure pre-training" not in _study(tmp_path / "clear", {**NOISE, "clm": (0.15, 0.10, 0.20)})
