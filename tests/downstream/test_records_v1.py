"""Records written by lmpt before a fine-tuning's result was typed (record_version 1, kept in records_v1/: a tiny mlm
run's GLUE entries scored when it ended, a hand run of a bundled task with its recipe searched, the GLUE suite's hand
records and a zero-shot hand record) read back by today's codec: each by its kind, its figures, seeds, gains and
control as written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lmpt.downstream.kinds.classification import ClassificationResult
from lmpt.downstream.kinds.pairs import PairsResult
from lmpt.downstream.kinds.regression import RegressionResult
from lmpt.downstream.records import read_record
from lmpt.downstream.task import read_result

RECORDS = Path(__file__).parent / "records_v1"
FINE_TUNED = {
    "classification_hand.json": ClassificationResult,
    "glue_mnli_run.json": ClassificationResult,
    "glue_rte_run.json": ClassificationResult,
    "glue_stsb_run.json": RegressionResult,
}


@pytest.mark.parametrize("name", sorted(FINE_TUNED))
def test_a_fine_tuned_record_written_before_reads_by_its_kind(name: str) -> None:
    raw = json.loads((RECORDS / name).read_text())
    record = read_record(RECORDS / name)
    assert record is not None and record.kind is FINE_TUNED[name] and record.task == raw["task"]
    headline = "pearson" if record.kind is RegressionResult else "accuracy"
    assert record.seed_figures(headline) == [s[headline] for s in raw["per_seed"]]
    assert record.figure(f"{headline}_mean") == raw[f"{headline}_mean"]
    gain = "mse" if record.kind is RegressionResult else "accuracy"
    assert record.gain(gain) is not None and record.gain(gain).gain == raw["gain"][gain]["gain"]  # type: ignore[union-attr]
    assert record.gain(gain).interval == tuple(raw["gain"][gain]["interval"])  # type: ignore[union-attr]
    control = record.control
    assert control is not None and control.figures[f"{headline}_mean"] == raw["scratch"][f"{headline}_mean"]
    logged = read_result(raw).logged()  # type: ignore[union-attr]
    assert logged[f"{headline}_mean"] == raw[f"{headline}_mean"]


def test_a_glue_entrys_record_logs_its_official_figures() -> None:
    raw = json.loads((RECORDS / "glue_mnli_run.json").read_text())
    logged = read_result(raw).logged()  # type: ignore[union-attr]
    assert raw["glue_metrics"] == ["matched_accuracy", "mismatched_accuracy"]
    assert logged["glue_score_mean"] == raw["glue_score_mean"]
    assert logged["mismatched_accuracy_mean"] == raw["mismatched_accuracy_mean"]
    assert logged["scratch_glue_score_mean"] == raw["scratch"]["glue_score_mean"]
    assert logged["bow_glue_score"] == raw["bag_of_words"]["glue_score"]


@pytest.mark.parametrize("name", ["glue_suite_hand.json", "glue_suite_search_hand.json"])
def test_the_glue_suites_record_reads_and_its_tasks_by_their_kinds(name: str) -> None:
    raw = json.loads((RECORDS / name).read_text())
    record = read_record(RECORDS / name)
    assert record is not None and record.kind is None and record.raw == raw  # the suite is no task kind
    for hf, result in raw["results"].items():
        kind = RegressionResult if hf == "stsb" else ClassificationResult
        assert isinstance(read_result(result), kind)


def test_a_zero_shot_record_reads_as_before() -> None:
    raw = json.loads((RECORDS / "pairs_hand.json").read_text())
    record = read_record(RECORDS / "pairs_hand.json")
    assert record is not None and record.kind is PairsResult and record.figure("accuracy") == raw["accuracy"]
    assert record.items("accuracy") is not None and record.control is not None
