"""scripts/time_to_quality.py: the held-out cut, the recipe that spells out the pre-issue-24 default, and one real
(short) recipe trained and scored on every held-out byte."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
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


def test_nanogpts_files_hold_the_same_cut(tmp_path: Path) -> None:
    """nanoGPT trains on lmpt's training text and is scored on its held-out text: the same cut, one id a character."""
    train, held = time_to_quality.split_corpus(tmp_path)
    held_ids = time_to_quality.nanogpt_data(train, held, tmp_path / "data")
    chars = sorted(set(train.read_text() + held.read_text()))
    for name, source in (("train.bin", train), ("val.bin", held)):
        ids = np.fromfile(tmp_path / "data" / name, dtype=np.uint16)
        assert "".join(chars[i] for i in ids) == source.read_text()
    assert held_ids == np.fromfile(tmp_path / "data" / "val.bin", dtype=np.uint16).tolist()  # what is scored


FAKE_NANOGPT_MODEL = """
from dataclasses import dataclass
import torch

@dataclass
class GPTConfig:
    block_size: int = 16
    vocab_size: int = 7

class GPT(torch.nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config, self.bias = config, torch.nn.Parameter(torch.zeros(config.vocab_size))
    def forward(self, idx, targets=None):
        assert idx.shape[1] <= self.config.block_size
        return self.bias.expand(*idx.shape, self.config.vocab_size), None
"""


@pytest.mark.parametrize("length", [10, 17, 150, 161])
def test_nanogpts_checkpoint_scores_every_held_out_character_once(tmp_path: Path, length: int) -> None:
    """A stand-in nanoGPT model with uniform logits over 7 ids: the total is exactly (characters - 1) x ln 7 for
    any length, so no character is scored twice or skipped, and no window exceeds the block size."""
    (tmp_path / "model.py").write_text(FAKE_NANOGPT_MODEL)
    (tmp_path / "out-shakespeare-char").mkdir()
    model_args = {"block_size": 16, "vocab_size": 7}
    state = {"_orig_mod.bias": torch.zeros(7)}  # as a compiled nanoGPT saves it
    torch.save({"model_args": model_args, "model": state}, tmp_path / "out-shakespeare-char" / "ckpt.pt")
    ids = [i % 7 for i in range(length)]
    nats = time_to_quality.nanogpt_heldout_nats(tmp_path, ids)
    assert math.isclose(nats, (length - 1) * math.log(7), rel_tol=1e-6)


def test_a_folder_that_is_not_a_nanogpt_checkout_is_refused(tmp_path: Path) -> None:
    command = [sys.executable, str(REPO / "scripts" / "time_to_quality.py"), "--nanogpt", str(tmp_path)]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and "is not a nanoGPT checkout" in lines[0], result.stderr
