"""Minimal pairs through the commands: a run scores a pair file when it ends (downstream.choice_tasks) and
`lmpt-eval RUN task=...` reports the same figures, as JSON or as tables."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from runner import TINY_RUN, run_lmpt

from lmpt.downstream.bundled import tasks_dir
from lmpt.downstream.eval_cli import evaluate

TINY = [
    "objective=mlm",
    *TINY_RUN,
    "trainer.max_steps=2",
]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(run directory, pair file): a tiny mlm run that scored 12 BLiMP pairs (two paradigms) when it ended."""
    root = tmp_path_factory.mktemp("pairs")
    lines = (tasks_dir() / "blimp-fast.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    pairs = root / "pairs.jsonl"
    pairs.write_text("".join(lines[:6] + lines[30:36]), encoding="utf-8")
    task, run_dir = f"downstream.choice_tasks=[{pairs}]", f"hydra.run.dir={root / 'run'}"
    done = run_lmpt(*TINY, task, run_dir, cwd=root)  # LMPT_CACHE_DIR from tests/conftest.py
    assert done.returncode == 0, done.stderr[-3000:]
    return root / "run", pairs


def test_lmpt_eval_scores_the_pairs_as_the_run_logged_them(run: tuple[Path, Path], capsys) -> None:
    run_dir, pairs = run
    evaluate([str(run_dir), f"task={pairs}", "json=true"])
    result = json.loads(capsys.readouterr().out)
    logged = json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[-1])
    assert result["accuracy"] == logged["downstream/pairs/accuracy"] and logged["downstream/pairs/chance"] == 0.5
    assert result["n"] == 12 and len(result["paradigms"]) == 2 and result["arch"] == "encoder"
    assert json.loads((run_dir / "downstream" / "pairs.json").read_text())["paradigms"] == result["paradigms"]
    evaluate([str(run_dir), f"task={pairs}", "json=true", "within_word=true"])
    assert "within-word" in json.loads(capsys.readouterr().out)["method"]
    evaluate([str(run_dir), f"task={pairs}"])
    table = capsys.readouterr().out
    assert "equal token length" in table and "per paradigm" in table and "length baseline" in table


def test_the_run_scored_the_pairs_beside_its_untrained_control(run: tuple[Path, Path], capsys) -> None:
    """downstream.control=scratch (the default): the record holds the untrained twin's per-pair outcomes, the very
    ones that twin gives when scored directly, and the gain over it; metrics.jsonl logs both; lmpt-eval's
    control=scratch gives the same."""
    from lmpt.downstream.control import scratch_twin
    from lmpt.downstream.significance import decode_outcomes
    from lmpt.downstream.task import Scoring, read_task
    from lmpt.rundir.trained import load_trained

    run_dir, pairs = run
    record = json.loads((run_dir / "downstream" / "pairs.json").read_text())
    trained = load_trained(run_dir)
    assert record["control"] == "scratch" and record["scratch"]["init_seed"] == trained.config.trainer.seed
    twin = read_task(str(pairs), how=Scoring(batch_size=8, hidden=True)).evaluate(scratch_twin(trained))
    assert record["scratch"]["accuracy_items"] == twin["accuracy_items"]
    correct, control = (decode_outcomes(record["accuracy_items"]), decode_outcomes(twin["accuracy_items"]))
    gain = record["gain"]["accuracy"]
    assert gain["gain"] == pytest.approx(correct.mean() - control.mean()) and gain["items"] == 12
    assert gain["interval"][0] <= gain["gain"] <= gain["interval"][1]
    equal = decode_outcomes(record["equal_length_pairs"])
    if equal.any():
        assert record["gain"]["accuracy_equal_length"]["items"] == int(equal.sum())
    logged = json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[-1])
    assert logged["downstream/pairs/scratch_accuracy"] == pytest.approx(control.mean())
    assert logged["downstream/pairs/accuracy_gain"] == pytest.approx(gain["gain"])
    evaluate([str(run_dir), f"task={pairs}", "json=true", "control=scratch"])
    assert json.loads(capsys.readouterr().out)["gain"] == record["gain"]
    evaluate([str(run_dir), f"task={pairs}", "json=true"])  # lmpt-eval's default: the run's model alone
    assert "gain" not in json.loads(capsys.readouterr().out)
    evaluate([str(run_dir), f"task={pairs}", "control=scratch"])
    assert "accuracy: gain over the scratch control" in capsys.readouterr().out
