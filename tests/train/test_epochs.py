"""The line after a run's start line: the training tokens it will see and the epochs they make over its training
text, with the data-constrained warning past 4 epochs; the dry-run plan shows the same from a warm cache."""

from __future__ import annotations

import json
from pathlib import Path

from corpus_files import lines, paragraphs
from runner import SMALL, run_lmpt

from lmpt.train.epochs import SCALING_NOTE, Exposure, SourceTokens

TINY = [a for a in SMALL if not a.startswith(("trainer.sample_tokens=", "tokenizer.vocab_size="))] + [
    "trainer.sample_tokens=0",
    "tokenizer.backend=bytelevel",
    "tokenizer.vocab_size=512",
    "data=text",
    "data.paths=[tiny.txt]",
    "data.val_paths=[val.txt]",
    "trainer.eval_every=0",
    "trainer.eval_batches=1",
    "model.n_layers=1",
    "model.d_model=32",
    "model.n_heads=2",
    "model.ffn_dim=64",
]


def _write_corpus(directory: Path) -> None:
    """A training text of a few thousand tokens (30 steps read it about 6 times), and its validation text."""
    (directory / "tiny.txt").write_bytes(lines(paragraphs()[:40]))
    (directory / "val.txt").write_bytes(lines(paragraphs()[40:80]))


def test_the_start_line_is_followed_by_tokens_and_epochs_and_warns_past_four(tmp_path: Path) -> None:
    _write_corpus(tmp_path)
    result = run_lmpt(*TINY, "trainer.max_steps=30", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    out = result.stdout.splitlines()
    start = next(i for i, line in enumerate(out) if "parameters)" in line)
    data = out[start + 1]
    assert data.startswith(
        "data: 15,360 training tokens (8 examples x 64 tokens reading 65 corpus tokens each x 30 steps), "
    ), data
    train_tokens = int(data.split(" epochs of the ")[1].split(" ")[0].replace(",", ""))
    epochs = float(data.split("), ")[1].split(" epochs")[0])
    assert abs(epochs - 8 * 65 * 30 / train_tokens) < 0.01 and epochs > 4
    assert "WARNING" in out[start + 2] and SCALING_NOTE in out[start + 2]
    status = json.loads(next(tmp_path.glob("outputs/*/*/status.json")).read_text())
    assert abs(status["epochs"] - 8 * 65 * 30 / train_tokens) < 1e-3  # what lmpt-study reports per objective

    plan = run_lmpt(*TINY, "trainer.max_steps=30", "trainer.dry_run=true", cwd=tmp_path)  # the cache is warm now
    assert plan.returncode == 0, plan.stderr
    assert f"{epochs:.2f} epochs of the {train_tokens:,} train tokens" in plan.stdout
    assert "WARNING" in plan.stdout and SCALING_NOTE in plan.stdout


def test_few_epochs_do_not_warn(tmp_path: Path) -> None:
    _write_corpus(tmp_path)
    result = run_lmpt(*TINY, "trainer.max_steps=2", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert " epochs of the " in result.stdout and "WARNING" not in result.stdout


def test_span_counts_the_corpus_tokens_each_example_reads() -> None:
    """Span corruption reads a window longer than seq_len: those corpus tokens are what repeats."""
    exposure = Exposure(16, 128 + 30, 145, 100, (SourceTokens("", 1.0, 10_000),))
    assert exposure.training_tokens == 16 * 158 * 100
    assert exposure.epochs() == 16 * 145 * 100 / 10_000
    assert "reading 145 corpus tokens each" in exposure.describe()


def test_a_mixture_names_its_most_repeated_source() -> None:
    sources = (SourceTokens("web", 3.0, 1_000_000), SourceTokens("books", 1.0, 1_000))
    exposure = Exposure(8, 64, 64, 100, sources)
    epochs = exposure.source_epochs()
    assert epochs["books"] == 8 * 64 * 100 * 0.25 / 1_000 and epochs["web"] < 1
    assert "most repeated source: books, 12.80 epochs" in exposure.describe()
    assert "source books's training text is seen 12.8 times" in exposure.warning()
