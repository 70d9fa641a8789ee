"""GLUE tasks as downstream.classification_tasks entries of real runs: each seed records the task's official figures
and score (CoLA's Matthews correlation, MRPC's F1 and accuracy, STS-B's Pearson and Spearman, MNLI's matched and
mismatched accuracy) computed by lmpt.downstream.glue, the run logs them, and lmpt-compare ranks two runs by the
official score with its gap tested over seeds; a regression figure ranks and is tested the same way. One tiny
`lmpt -m objective=clm,mlm` sweep over a fake GLUE folder (a few dozen rows a task)."""

from __future__ import annotations

import json
import shutil
import statistics
from pathlib import Path

import numpy as np
import pytest
from glue_files import write_glue
from runner import TINY_RUN, run_lmpt
from sklearn.metrics import accuracy_score, f1_score

from lmpt.config.schema import DownstreamConfig
from lmpt.downstream.glue import TASKS
from lmpt.downstream.glue_files import glue_labelled
from lmpt.downstream.official import official_figures
from lmpt.downstream.records import task_record
from lmpt.downstream.run_tasks import score_downstream
from lmpt.downstream.significance import welch_t
from lmpt.report.compare import compare
from lmpt.report.ranking import Ranking, rank_runs
from lmpt.report.runs import find_runs
from lmpt.report.significance import WELCH, neighbour_significance
from lmpt.study.record import headline_keys

TINY = [
    *TINY_RUN,
    "trainer.max_steps=2",
]
SCORING = ["downstream.seeds=2", "downstream.epochs=1", "downstream.batch_size=16"]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(sweep directory, GLUE folder): a clm and an mlm run, each scoring MRPC and STS-B when it ends."""
    root = tmp_path_factory.mktemp("glue-runs")
    glue = write_glue(root / "glue", ("MRPC", "STS-B", "MNLI", "CoLA"))
    entries = f"downstream.classification_tasks=[glue:mrpc@{glue},glue:sts-b@{glue}]"
    done = run_lmpt("-m", "objective=clm,mlm", *TINY, *SCORING, entries, f"hydra.sweep.dir={root / 'sweep'}", cwd=root)
    assert done.returncode == 0, done.stderr[-3000:]
    return root / "sweep", glue


def _logged(run: Path) -> dict:
    return json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])


def test_official_figures_are_sklearns_from_a_seeds_predictions(tmp_path: Path) -> None:
    glue = write_glue(tmp_path / "glue", ("MRPC", "MNLI"))
    rng = np.random.default_rng(0)
    mrpc = glue_labelled(str(glue), TASKS["mrpc"]).examples
    predicted = rng.integers(0, 2, len(mrpc["dev"])).tolist()
    gold, written = [e.label for e in mrpc["dev"]], [str(p) for p in predicted]
    figures = official_figures(TASKS["mrpc"].metrics, {"dev": gold}, {"": predicted}, ["0", "1"])
    assert figures["f1"] == pytest.approx(f1_score(gold, written, pos_label="1"))
    assert figures["accuracy"] == pytest.approx(accuracy_score(gold, written))
    assert figures["glue_score"] == pytest.approx((figures["f1"] + figures["accuracy"]) / 2)
    mnli = glue_labelled(str(glue), TASKS["mnli"]).examples  # dev matched scored as "dev", mismatched as "test"
    classes = list(TASKS["mnli"].labels)
    guesses = {p: rng.integers(0, 3, len(mnli[s])).tolist() for p, s in (("", "dev"), ("test_", "test"))}
    labels = {s: [e.label for e in mnli[s]] for s in ("dev", "test")}
    figures = official_figures(TASKS["mnli"].metrics, labels, guesses, classes)
    for figure, prefix, split in (("matched_accuracy", "", "dev"), ("mismatched_accuracy", "test_", "test")):
        expected = accuracy_score([e.label for e in mnli[split]], [classes[i] for i in guesses[prefix]])
        assert figures[figure] == pytest.approx(expected)


def test_glue_entries_record_and_log_their_official_figures(sweep: tuple[Path, Path]) -> None:
    sweep_dir, _ = sweep
    for job in ("0", "1"):
        run, logged = sweep_dir / job, _logged(sweep_dir / job)
        mrpc, stsb = task_record(run, "MRPC"), task_record(run, "STS-B")
        assert mrpc is not None and stsb is not None
        for seed in mrpc.raw["per_seed"]:  # every seed's F1 and accuracy, the task's score their mean
            assert seed["glue_score"] == pytest.approx((seed["f1"] + seed["accuracy"]) / 2)
        for seed in stsb.raw["per_seed"]:
            assert seed["glue_score"] == pytest.approx((seed["pearson"] + seed["spearman"]) / 2)
        for seed in mrpc.raw["scratch"]["per_seed"]:  # the untrained control's seeds too
            assert seed["glue_score"] == pytest.approx((seed["f1"] + seed["accuracy"]) / 2)
        floor = mrpc.raw["bag_of_words"]
        assert floor["glue_score"] == pytest.approx((floor["f1"] + floor["accuracy"]) / 2)
        assert mrpc.raw["glue_metrics"] == ["f1", "accuracy"] and stsb.raw["glue_metrics"] == ["pearson", "spearman"]
        for task, record in (("MRPC", mrpc), ("STS-B", stsb)):
            mean = statistics.fmean(s["glue_score"] for s in record.raw["per_seed"])
            assert logged[f"downstream/{task}/glue_score_mean"] == pytest.approx(mean)
            assert logged[f"downstream/{task}/scratch_glue_score_mean"] == record.raw["scratch"]["glue_score_mean"]
            assert logged[f"downstream/{task}/bow_glue_score"] == record.raw["bag_of_words"]["glue_score"]
        assert {"downstream/MRPC/f1_mean", "downstream/STS-B/spearman_mean"} <= set(logged)


def test_mnli_and_cola_entries_score_by_their_own_figures(sweep: tuple[Path, Path], tmp_path: Path) -> None:
    sweep_dir, glue = sweep
    run = tmp_path / "run"
    shutil.copytree(sweep_dir / "1", run)  # a copy: the sweep's own records stay as its runs wrote them
    downstream = DownstreamConfig(
        choice_tasks=[],
        classification_tasks=[f"glue:mnli@{glue}", f"glue:cola@{glue}"],
        mode="probe",
        seeds=2,
        epochs=1,
        batch_size=16,
        lr="fixed",
        control="none",
        weights="last",
    )
    figures = score_downstream(downstream, run, 2)
    mnli, cola = task_record(run, "MNLI"), task_record(run, "CoLA")
    assert mnli is not None and cola is not None
    for seed in mnli.raw["per_seed"]:  # matched: the dev split scored; mismatched: the second dev file, as test_
        assert seed["matched_accuracy"] == pytest.approx(seed["accuracy"])
        assert seed["mismatched_accuracy"] == pytest.approx(seed["test_accuracy"])
        assert seed["glue_score"] == pytest.approx((seed["accuracy"] + seed["test_accuracy"]) / 2)
    assert all(seed["glue_score"] == pytest.approx(seed["mcc"]) for seed in cola.raw["per_seed"])  # Matthews alone
    assert figures["downstream/CoLA/glue_score_mean"] == pytest.approx(cola.raw["mcc_mean"])
    assert {"downstream/MNLI/matched_accuracy_mean", "downstream/MNLI/mismatched_accuracy_mean"} <= set(figures)


def test_lmpt_compare_ranks_glue_runs_by_the_official_score_tested_over_seeds(
    sweep: tuple[Path, Path], tmp_path: Path
) -> None:
    sweep_dir, _ = sweep
    runs = find_runs([sweep_dir])
    ranked, ranking = rank_runs(runs)
    assert ranking.key == "downstream/MRPC/glue_score_mean" and ranking.higher_is_better
    scores = [ranking.value(r) for r in ranked]
    assert scores == sorted(scores, reverse=True)
    significance = neighbour_significance(ranked, ranking)
    assert significance is not None
    seeds = [[s["glue_score"] for s in task_record(r.path, "MRPC").raw["per_seed"]] for r in ranked]  # type: ignore[union-attr]
    gap = significance.gaps[id(ranked[0])]
    assert gap.test == WELCH and gap.p == pytest.approx(welch_t(seeds[0], seeds[1]))
    compare([sweep_dir], tmp_path / "report")
    markdown = (tmp_path / "report" / "compare.md").read_text()
    assert "Ranked by downstream/MRPC/glue_score_mean (higher is better)" in markdown
    header = next(line for line in markdown.splitlines() if line.startswith("| ") and "vs_next" in line)
    assert "MRPC/glue_score_mean_low" in header and "MRPC/glue_score_mean_control" in header


def test_a_regression_figure_ranks_and_is_tested_over_seeds(sweep: tuple[Path, Path]) -> None:
    sweep_dir, _ = sweep
    for figure in ("pearson", "glue_score"):
        key = f"downstream/STS-B/{figure}_mean"
        ranked, ranking = rank_runs(find_runs([sweep_dir]), Ranking(key, f"ranked by {key}", higher_is_better=True))
        significance = neighbour_significance(ranked, ranking)
        assert significance is not None
        seeds = [[s[figure] for s in task_record(r.path, "STS-B").raw["per_seed"]] for r in ranked]  # type: ignore[union-attr]
        gap = significance.gaps[id(ranked[0])]
        assert gap.test == WELCH and gap.p == pytest.approx(welch_t(seeds[0], seeds[1]))
        assert all(significance.interval(r) is not None for r in ranked)  # each figure's t interval over its seeds


def test_a_studys_headline_figure_of_a_glue_or_regression_task() -> None:
    rows = [
        {
            "downstream": {
                "downstream/MRPC/accuracy_mean": (0.5, None),
                "downstream/MRPC/glue_score_mean": (0.4, None),
                "downstream/sick/pearson_mean": (0.2, None),
                "downstream/sick/mse_mean": (1.0, None),
            }
        }
    ]
    assert headline_keys(rows) == ["downstream/MRPC/glue_score_mean", "downstream/sick/pearson_mean"]
