"""study.md a reader can read, from fake final runs (no training): it leads with the gains over the untrained
controls, orders the objectives by one stated rule (the gain on a zero-shot task, never a fine-tuned task every run
loses to its control), keeps its tables to a handful of columns with short numbers, and links study_full.md, which
holds every figure. The charts are named by the study's objectives and budget, never its directory."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from lmpt.downstream.significance import encode_outcomes
from lmpt.study.gains import GainRow, GainTable, PooledGain, study_gains
from lmpt.study.plan import StudyPlan
from lmpt.study.rank_rule import RankRule, rank_rule
from lmpt.study.record import STUDY_FULL_MD, gains_table, recipe_text, short_override, write_study
from lmpt.study.runs import FinalRun, read_final

BUDGET = "1e12flops"
TASKS = ["pairs", "clinc"]
LR = {"clm": "0.037861878865426045", "mlm": "0.02511949870636483"}


def fake_final(root: Path, objective: str, seed: int, right: int, control_right: int, clinc: float) -> FinalRun:
    """A completed final run scored zero-shot on `pairs` (right of 200 items; its control control_right) and
    fine-tuned on `clinc` (dev accuracy `clinc`, below its control's 0.6)."""
    path = root / "runs" / BUDGET / f"{objective}-seed{seed}"
    (path / "downstream").mkdir(parents=True)
    (path / ".hydra").mkdir()
    rng = np.random.default_rng(seed)
    correct, control = np.zeros(200, bool), np.zeros(200, bool)
    correct[rng.permutation(200)[:right]] = True
    control[rng.permutation(200)[:control_right]] = True
    accuracy, scratch = right / 200, control_right / 200
    pairs = {
        "accuracy": accuracy,
        "accuracy_items": encode_outcomes(correct),
        "n": 200,
        "scratch": {"accuracy": scratch, "accuracy_items": encode_outcomes(control)},
        "gain": {
            "accuracy": {
                "gain": accuracy - scratch,
                "pretrained": accuracy,
                "interval": [accuracy - scratch - 0.05, accuracy - scratch + 0.05],
            }
        },
    }
    tuned = {
        "accuracy_mean": clinc,
        "per_seed": [{"accuracy": clinc - 0.01}, {"accuracy": clinc + 0.01}],
        "scratch": {"accuracy_mean": 0.6},
        "gain": {"accuracy": {"gain": clinc - 0.6, "pretrained": clinc, "interval": [clinc - 0.62, clinc - 0.58]}},
    }
    (path / "downstream" / "pairs.json").write_text(json.dumps(pairs))
    (path / "downstream" / "clinc.json").write_text(json.dumps(tuned))
    logged = {
        "pairs/accuracy": accuracy,
        "pairs/scratch_accuracy": scratch,
        "pairs/accuracy_gain": accuracy - scratch,
        "clinc/accuracy_mean": clinc,
        "clinc/scratch_accuracy_mean": 0.6,
        "clinc/accuracy_gain": clinc - 0.6,
    }
    figures = {f"downstream/{key}": value for key, value in logged.items()}
    lines = [
        {"step": 10, "tokens": 1000, "loss_tokens": 1000, "flops": 1e12, "val_loss": 4.0 + seed / 10},
        {"step": 10, **figures},
    ]
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    (path / "config.yaml").write_text(f"objective:\n  name: {objective}\nmodel:\n  arch: auto\n")
    (path / "status.json").write_text(json.dumps({"status": "completed", "step": 10, "epochs": 1.5}))
    overrides = [f"objective={objective}", f"trainer.seed={seed}", f"optimizer.lr={LR[objective]}"]
    (path / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
    return read_final(path, objective, seed, BUDGET, TASKS)


def plan_of(directory: Path) -> StudyPlan:
    space = {"optimizer.lr": "tag(log, interval(0.0001, 0.1))"}
    return StudyPlan(
        ["mlm", "clm"],
        [0, 1],
        directory,
        [],
        [BUDGET],
        "2.5e11flops",
        {"clm": 40, "mlm": 40},
        "last",
        space,
        2,
        "random",
        0,
        recipes=[],
        tasks=TASKS,
    )


@pytest.fixture()
def study(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    """A study whose fine-tuned task ranks mlm first (every run below its control) while the zero-shot gain ranks
    clm first: clm gains +0.15 on pairs, mlm +0.05."""
    import lmpt.report.ranking_plot as ranking_plot

    titles: list[str] = []
    draw = ranking_plot.plot_ranking
    monkeypatch.setattr(
        ranking_plot, "plot_ranking", lambda chart, path, title: (titles.append(title), draw(chart, path, title))
    )
    directory = tmp_path / "study"
    finals = {
        "mlm": [fake_final(directory, "mlm", s, 120, 110, 0.55 - s / 100) for s in (0, 1)],
        "clm": [fake_final(directory, "clm", s, 130, 100, 0.45 - s / 100) for s in (0, 1)],
    }
    write_study(plan_of(directory), {}, finals)
    return {"dir": directory, "titles": titles, "md": (directory / "study.md").read_text()}


def _tables(markdown: str) -> list[list[str]]:
    """Each Markdown table's rows (lines starting with `|`), table by table."""
    tables, current = [], []
    for line in [*markdown.splitlines(), ""]:
        if line.startswith("|"):
            current.append(line)
        elif current:
            tables.append(current)
            current = []
    return tables


def test_study_md_leads_with_the_gains_and_ranks_by_the_zero_shot_gain(study: dict) -> None:
    markdown = study["md"]
    sections = re.findall(r"^## (.+)$", markdown, flags=re.M)
    assert sections[:2] == ["Gain over the untrained control", "Objectives"]
    assert "Ranked by the gain over the untrained control on pairs, zero-shot" in markdown
    gains = _tables(markdown)[0]
    assert gains[0] == "| budget | objective | pairs | clinc |"  # the ranking task first
    assert markdown.index("- On pairs, clm's gain") < markdown.index("- On clinc, no objective's gain")
    assert [row.split(" | ")[1] for row in gains[2:]] == ["clm", "mlm"]  # +0.150 before +0.050
    objectives = _tables(markdown)[1]
    assert objectives[0] == "| objective | chosen recipe | seeds | val_loss (own) | pairs | clinc |"
    assert [row.split(" | ")[0].strip("| ") for row in objectives[2:]] == ["clm", "mlm"]
    record = json.loads((study["dir"] / "study.json").read_text())
    assert record["ranked_objectives"] == ["clm", "mlm"]
    assert record["ranking"]["key"] == "downstream/pairs/accuracy"  # not clinc's accuracy_mean, where mlm leads
    assert record["ranking"]["objectives_by"].startswith("Ranked by the gain over the untrained control on pairs")


def test_the_console_orders_the_objectives_as_study_md_does(capsys: pytest.CaptureFixture, study: dict) -> None:
    shown = capsys.readouterr().out
    assert (
        "Gain over the untrained control" in shown and "Ranked by the gain over the untrained control on pairs" in shown
    )
    table = shown[shown.index("budget") :]
    assert table.index("clm") < table.index("mlm")  # clm's +0.150 before mlm's +0.050, as study.md ranks them
    assert "each run's own figure; the objectives are ordered by their gain" in study["titles"][0]


def test_the_final_runs_rank_by_the_same_task_and_the_charts_name_no_directory(study: dict) -> None:
    final = study["md"].split("## Final runs", 1)[1]
    runs = _tables(final)[0]
    assert runs[0] == "| objective | seed | step | val_loss (own) | pairs/accuracy [95%] | vs next |"
    assert [row.split(" | ")[0].strip("| ") for row in runs[2:]] == ["clm", "clm", "mlm", "mlm"]
    titles = study["titles"]
    assert titles and all(t.startswith("mlm, clm at 1e12flops: ranked by pairs/accuracy") for t in titles)
    assert not any("study" in t.split(":")[0] or "/" in t.split(":")[0] for t in study["titles"])
    assert "![ranking.png](ranking.png)" in final and "![val_loss.png](val_loss.png)" in final


def test_tables_fit_a_page_with_short_numbers_and_link_the_full_tables(study: dict) -> None:
    markdown = study["md"]
    assert all(len(table[0].split(" | ")) <= 8 for table in _tables(markdown))  # a handful of columns
    assert "0.0251194987" not in markdown and "0.0378618788" not in markdown
    assert f"[{STUDY_FULL_MD}]({STUDY_FULL_MD})" in markdown
    full = (study["dir"] / STUDY_FULL_MD).read_text()
    assert "pairs/scratch_accuracy" in full and "clinc/accuracy_gain" in full and "| epochs |" in full
    assert "val_ppl" in full  # the ranked runs' every column
    ranking_md = (study["dir"] / "ranking.md").read_text()
    assert "optimizer.lr=0.02512" in ranking_md and "0.02511949870636483" not in ranking_md


def _gains(points: dict[str, float]) -> GainTable:
    return GainTable(
        [
            GainRow(BUDGET, name, "pairs", "accuracy", PooledGain(g, g - 0.02, g + 0.02, 2, "m"))
            for name, g in points.items()
        ]
    )


def _final(name: str, keys: list[str]) -> FinalRun:
    return FinalRun(name, 0, BUDGET, Path(name), "completed", 4.0, 10, 1e12, dict.fromkeys(keys, 0.5), {}, 1.0)


def test_the_rule_prefers_a_zero_shot_task_and_says_when_its_order_is_no_evidence() -> None:
    clinc = GainRow(BUDGET, "clm", "clinc", "accuracy", PooledGain(-0.1, -0.15, -0.05, 2, "m"))
    both = GainTable([GainRow(BUDGET, "clm", "pairs", "accuracy", PooledGain(0.1, 0.05, 0.15, 2, "m")), clinc])
    finals = {"clm": [_final("clm", ["downstream/pairs/accuracy", "downstream/clinc/accuracy_mean"])]}
    assert rank_rule(both, finals) == RankRule("pairs")  # clinc sorts first by name; pairs is zero-shot
    tuned = GainTable([clinc])
    rule = rank_rule(tuned, {"clm": [_final("clm", ["downstream/clinc/accuracy_mean"])]})
    assert rule == RankRule("clinc", zero_shot=False) and rule.key == "downstream/clinc/accuracy_mean"
    assert "no zero-shot task" in rule.sentence
    assert rank_rule(GainTable(), finals).task is None and rank_rule(GainTable(), finals).sentence == ""
    noise = _gains({"clm": 0.01, "mlm": 0.015})
    assert "is above 0 at 95% at any budget" in RankRule("pairs").caveat(noise)
    assert RankRule("pairs").caveat(_gains({"clm": 0.05})) == ""
    assert RankRule("pairs").order(noise, BUDGET, ["clm", "gpt-bert", "mlm"]) == ["mlm", "clm", "gpt-bert"]
    assert [row.split(" | ")[1] for row in gains_table(noise, RankRule("pairs"), [BUDGET])[2:]] == ["mlm", "clm"]


def test_numbers_in_recipes_and_run_names_keep_4_significant_digits() -> None:
    assert recipe_text({"optimizer.lr": "0.037861878865426045", "optimizer.adamw_lr": "0.1"}) == (
        "optimizer.lr=0.03786 optimizer.adamw_lr=0.1"
    )
    assert short_override("optimizer.lr=0.02511949870636483") == "optimizer.lr=0.02512"
    assert [short_override(o) for o in ("trainer.seed=2", "objective=mlm", "data=wikitext", "flag")] == [
        "trainer.seed=2",
        "objective=mlm",
        "data=wikitext",
        "flag",
    ]
    assert study_gains([BUDGET], ["clm"], {}) == GainTable()


def _overlaps(fig, box) -> list[int]:
    """Which of the figure's axes `box` (a drawn legend's window extent) overlaps."""
    return [i for i, ax in enumerate(fig.axes) if box.overlaps(ax.get_window_extent())]


def test_the_val_loss_chart_keeps_its_legend_off_the_panels(study: dict) -> None:

    from lmpt.report.plot import draw_val_curves
    from lmpt.report.runs import find_runs

    fig = draw_val_curves(find_runs([study["dir"] / "runs"]))
    fig.canvas.draw()
    (legend,) = fig.legends
    assert len(legend.get_texts()) == 4 and _overlaps(fig, legend.get_window_extent()) == []


def test_the_ranking_chart_keeps_its_legend_off_the_runs(study: dict) -> None:

    from lmpt.report.ranking import rank_runs
    from lmpt.report.ranking_plot import draw_ranking, ranking_chart
    from lmpt.report.runs import find_runs
    from lmpt.report.significance import neighbour_significance

    runs, ranking = rank_runs(find_runs([study["dir"] / "runs"]), RankRule("pairs").ranking())
    fig = draw_ranking(ranking_chart(runs, ranking, neighbour_significance(runs, ranking)), "title")
    fig.canvas.draw()
    (legend,) = fig.legends
    assert "scratch control" in [t.get_text() for t in legend.get_texts()]
    assert _overlaps(fig, legend.get_window_extent()) == []
