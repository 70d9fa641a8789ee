"""Records written by lmpt before a fine-tuning's result was typed (record_version 1, kept in records_v1/: a tiny mlm
run's GLUE entries scored when it ended, a hand run of a bundled task with its recipe searched, the GLUE suite's hand
records and a zero-shot hand record) read back by today's codec: each as its kind's Result, its typed fields, its
figures, seeds, gains and control as written, and written back the same, key for key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lmpt.downstream.kinds.classification import ClassificationResult
from lmpt.downstream.kinds.fine_tuned_result import FineTunedResult
from lmpt.downstream.kinds.pairs import PairsResult
from lmpt.downstream.kinds.regression import RegressionResult
from lmpt.downstream.records import read_record
from lmpt.downstream.task import UnknownRecord, read_result

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
    assert type(record) is FINE_TUNED[name] and record.task == raw["task"]
    headline = "pearson" if isinstance(record, RegressionResult) else "accuracy"
    assert record.seed_figures(headline) == [s[headline] for s in raw["per_seed"]]
    assert record.figure(f"{headline}_mean") == raw[f"{headline}_mean"]
    gain = "mse" if isinstance(record, RegressionResult) else "accuracy"
    assert record.gain(gain) is not None and record.gain(gain).gain == raw["gain"][gain]["gain"]  # type: ignore[union-attr]
    assert record.gain(gain).interval == tuple(raw["gain"][gain]["interval"])  # type: ignore[union-attr]
    control = record.control
    assert control is not None and control.figures[f"{headline}_mean"] == raw["scratch"][f"{headline}_mean"]
    logged = read_result(raw).logged()  # type: ignore[union-attr]
    assert logged[f"{headline}_mean"] == raw[f"{headline}_mean"]


@pytest.mark.parametrize("name", sorted(FINE_TUNED))
def test_a_fine_tuned_record_written_before_is_typed_and_writes_back_the_same(name: str) -> None:
    raw = json.loads((RECORDS / name).read_text())
    result = read_result(raw)
    assert isinstance(result, FineTunedResult) and result.kept == {}  # every key read as a field
    assert result.to_json() == raw and list(result.to_json()) == list(raw)  # and written back key for key
    assert result.model is not None and [s.seed for s in result.model.seeds] == [s["seed"] for s in raw["per_seed"]]
    assert (result.model.recipe.lr, result.model.recipe.pooling) == (raw["lr"], raw["pooling"])
    assert result.scratch is not None and result.scratch.init_seed == raw["scratch"]["init_seed"]
    assert result.scratch.shared is False and result.scratch.key == raw["scratch"]["key"]
    assert result.floor is not None and result.floor.method == raw["bag_of_words"]["method"]
    assert result.metrics == tuple(raw.get("glue_metrics", ()))


def test_a_searched_recipe_reads_as_its_search() -> None:
    raw = json.loads((RECORDS / "classification_hand.json").read_text())
    result = read_result(raw)
    assert isinstance(result, FineTunedResult) and result.model is not None
    search = result.model.recipe.search
    assert search is not None and search.to_json() == raw["search"] and search.figure == "accuracy"
    assert [(c.lr, c.pooling) for c in search.candidates] == [
        (c["lr"], c["pooling"]) for c in raw["search"]["candidates"]
    ]


def test_a_record_whose_fields_are_not_what_lmpt_writes_still_reads_and_keeps_them() -> None:
    raw = json.loads((RECORDS / "glue_rte_run.json").read_text())
    odd = {**raw, "lr": "fast", "seeds": "two", "note": "by hand", "accuracy_mean": "high"}
    del odd["kind"], odd["record_version"]  # as written before records named their kind
    result = read_result(odd)
    assert isinstance(result, ClassificationResult) and result.model is None and result.seeds is None
    assert result.kept["lr"] == "fast" and result.kept["note"] == "by hand"
    assert (
        result.to_json() == odd and result.malformed("accuracy_mean") and result.figure("mcc_mean") == raw["mcc_mean"]
    )


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
    assert type(record) is UnknownRecord and record.raw == raw  # the suite is no task kind
    for hf, result in raw["results"].items():
        kind = RegressionResult if hf == "stsb" else ClassificationResult
        typed = read_result(result)
        assert isinstance(typed, kind) and typed.to_json() == result


def test_a_zero_shot_record_reads_as_before() -> None:
    raw = json.loads((RECORDS / "pairs_hand.json").read_text())
    record = read_record(RECORDS / "pairs_hand.json")
    assert isinstance(record, PairsResult) and record.figure("accuracy") == raw["accuracy"] and record.to_json() == raw
    assert record.items("accuracy") is not None and record.control is not None
