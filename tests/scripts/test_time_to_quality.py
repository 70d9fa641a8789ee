"""scripts/time_to_quality.py: the held-out cut, the recipe that spells out the pre-issue-24 default, and one real
(short) recipe trained and scored on every held-out byte."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from composed import composed

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
import time_to_quality  # noqa: E402


def test_the_cut_keeps_every_byte_and_ends_the_training_text_at_a_turn(tmp_path: Path) -> None:
    train, held = time_to_quality.split_corpus(tmp_path)
    corpus = time_to_quality.CORPUS.read_bytes()
    assert train.read_bytes() + held.read_bytes() == corpus
    assert train.read_bytes().endswith(b"\n\n") and not held.read_bytes().startswith(b"\n")
    assert 0.9 <= train.stat().st_size / len(corpus) < 0.91


def test_before_spells_out_the_old_default_and_the_default_is_the_new_one() -> None:
    before = composed(*time_to_quality.BEFORE_ISSUE_24.split())
    assert (before.optimizer.name, before.optimizer.lr) == ("adamw", 1e-3)
    assert (before.data.seq_len, before.trainer.max_steps, before.trainer.batch_size) == (256, 300, 16)
    assert (before.scheduler.name, before.scheduler.warmup_steps, before.scheduler.min_lr_ratio) == ("cosine", 50, 0.1)
    after = composed()
    assert (after.optimizer.name, after.optimizer.lr, after.optimizer.adamw_lr) == ("muon", 0.04, 2e-2)
    assert (after.data.seq_len, after.trainer.max_steps, after.scheduler.warmup_steps) == (128, 200, 20)


@pytest.mark.soak  # CI: a shorter test covers the same promise; run with `pytest -m soak`
def test_a_recipe_is_trained_and_scored_on_every_held_out_byte(tmp_path: Path) -> None:
    recipe = "tokenizer.vocab_size=512 model.n_layers=1 trainer.max_steps=4 trainer.log_every=2 trainer.eval_every=0"
    command = [
        sys.executable,
        str(REPO / "scripts" / "time_to_quality.py"),
        "--recipe",
        f"short={recipe}",
        "--rounds",
        "1",
        "--json",
        str(tmp_path / "ttq.json"),
        "--keep",
        str(tmp_path / "runs"),
    ]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (run,) = json.loads((tmp_path / "ttq.json").read_text())["results"]["short"]
    assert run["steps"] == 4 and run["scored_tokens"] == run["heldout_tokens"] > 10_000
    held_bytes = (tmp_path / "runs" / "heldout.txt").stat().st_size
    assert math.isclose(run["bpb"], run["heldout_loss"] * run["scored_tokens"] / math.log(2) / held_bytes, rel_tol=1e-6)
    assert 2 < run["bpb"] < 8 and run["last_loss"] < run["first_loss"]
    assert "reaches first's bpb" in result.stdout and "short" in result.stdout
