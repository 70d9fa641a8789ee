"""The real path: two small models score a zero-shot task as a run's end does (lmpt.downstream.run_tasks: the
record RUN/downstream/TASK.json and the logged figures), and lmpt-compare pairs them item by item."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from report_fakes import SHARED, eval_record, make_run, train_record

from lmpt.config.schema import ModelConfig
from lmpt.downstream.bundled import tasks_dir
from lmpt.downstream.figures import metric_key
from lmpt.downstream.likelihood import pair_figures
from lmpt.downstream.records import record_path, write_record
from lmpt.downstream.significance import decode_outcomes, mcnemar_exact
from lmpt.downstream.task import Scoring, read_task
from lmpt.downstream.zero_shot_files import MinimalPair
from lmpt.model import build_model
from lmpt.report.compare import main
from lmpt.rundir.trained import Trained

QUESTIONS = 60


def scored_run(path: Path, seed: int, shakespeare, task_file: Path) -> dict:
    """A run directory whose tiny decoder (initialised from `seed`) scored `task_file`, recorded as a run's end does."""
    torch.manual_seed(seed)
    cfg = ModelConfig(name="tiny", d_model=32, n_layers=1, n_heads=2, ffn_dim=64, max_seq_len=64)
    model = build_model(cfg, "decoder", shakespeare.tokenizer.vocab_size, shakespeare.tokenizer.special.pad).eval()
    trained = Trained(model, shakespeare.tokenizer, OmegaConf.create({}), "decoder", "clm", path)
    task = read_task(str(task_file), how=Scoring(batch_size=16, hidden=True), zero_shot=True)
    result = task.score(trained).with_keys(first={"task": "cloze"})
    figures = {metric_key("cloze", k): v for k, v in result.logged().items()}
    records = [train_record(4, 6.0, 4000.0), eval_record(4, 5.9), {"step": 4, **figures}]
    make_run(path, [*SHARED, f"trainer.seed={seed}"], records, status={"status": "completed"})
    write_record(record_path(path, "cloze"), result.record)
    return result.record


def test_two_scored_runs_are_paired_item_by_item(shakespeare, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    task = tmp_path / "cloze.jsonl"
    task.write_text("".join((tasks_dir() / "shakespeare-cloze.jsonl").read_text().splitlines(True)[:QUESTIONS]))
    results = [scored_run(tmp_path / "runs" / str(seed), seed, shakespeare, task) for seed in (0, 1)]
    for seed in (0, 1):
        record = json.loads((tmp_path / "runs" / str(seed) / "downstream" / "cloze.json").read_text())
        items = decode_outcomes(record["accuracy_items"])
        assert items is not None and items.size == QUESTIONS and items.mean() == pytest.approx(record["accuracy"])
        assert record["accuracy_low"] <= record["accuracy"] <= record["accuracy_high"]
        assert len(decode_outcomes(record["accuracy_norm_items"])) == QUESTIONS and len(record["items_digest"]) == 16
    assert results[0]["items_digest"] == results[1]["items_digest"]

    with pytest.raises(SystemExit) as ended:
        main([str(tmp_path / "runs"), f"out={tmp_path / 'report'}"])
    assert ended.value.code == 0
    out = capsys.readouterr().out
    assert "ranked by downstream/cloze/accuracy" in out and "McNemar p=" in out
    rows = list(csv.DictReader((tmp_path / "report" / "compare.csv").open()))
    best, second = (results[int(Path(row["path"]).name)] for row in rows)
    expected = mcnemar_exact(*(decode_outcomes(r["accuracy_items"]) for r in (best, second)))
    assert rows[0]["vs_next_test"] == "McNemar" and float(rows[0]["vs_next_holm_p"]) == pytest.approx(expected)
    assert float(rows[0]["cloze/accuracy_low"]) == pytest.approx(best["accuracy_low"])


def test_minimal_pairs_keep_their_per_pair_outcomes() -> None:
    pairs = [MinimalPair("a b", "b a", "syntax", "p1", "-")] * 4
    result = pair_figures(pairs, [-1.0, -2.0, -1.0, -1.0], [-2.0, -1.0, -3.0, -2.0], [2] * 4, [2] * 4)
    assert result["accuracy_items"] == "1011"
    assert [result["accuracy_low"], result["accuracy_high"]] == result["interval"]
    assert np.array_equal(decode_outcomes(result["accuracy_items"]), [True, False, True, True])
