"""A small text's problems said at once, with keys that train on it (issue 63, point 17): six paragraphs took three
launches, one refusal each (the split, the vocabulary, the window)."""

from __future__ import annotations

from pathlib import Path

import pytest
from runner import run_lmpt

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def six(tmp_path: Path) -> Path:
    stories = (REPO / "lmpt" / "corpora" / "tinystories-prefix.txt").read_text(encoding="utf-8").split("\n\n")
    (tmp_path / "six.txt").write_text("\n\n".join(stories[:6]), encoding="utf-8")
    return tmp_path


def _refusal(done) -> str:
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("lmpt: error: this text is small"), done.stderr
    return lines[0]


def test_every_problem_of_six_paragraphs_is_one_line_and_its_keys_train(six: Path) -> None:
    said = _refusal(run_lmpt("data=text", "data.paths=[six.txt]", "trainer.max_steps=3", cwd=six))
    assert "data.val_fraction=0.05 holds out none of its 8 sentences" in said
    assert "tokenizer.vocab_size=4096 is more than it supports (at most ~" in said
    keys = said.split("These keys train on it: ")[1].split(" (")[0].split()
    assert [k.split("=")[0] for k in keys] == ["data.val_fraction", "tokenizer.vocab_size"]
    assert not (six / "outputs").exists()  # nothing written
    done = run_lmpt("data=text", "data.paths=[six.txt]", *keys, "trainer.max_steps=3", cwd=six)
    assert done.returncode == 0, done.stderr


def test_a_window_longer_than_the_held_out_text_is_named_with_one_that_fits(six: Path) -> None:
    keys = ["data.val_fraction=0.2", "tokenizer.vocab_size=448", "data.seq_len=512", "model.max_seq_len=1024"]
    said = _refusal(run_lmpt("data=text", "data.paths=[six.txt]", *keys, cwd=six))
    assert "data.seq_len=512 makes windows longer than its" in said and "train on it: data.seq_len=256" in said
