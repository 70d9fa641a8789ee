"""Every objective's corpus requirements are checked on every split, training and validation, before any
model is built: through the real `lmpt` command, one line naming the text and what to do, exit code 2
(issue 13, point 2)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from runner import SMALL, TINY_MODEL, run_lmpt

from lmpt.config.schema import DataConfig
from lmpt.data.cache import PreparedData
from lmpt.objectives.checks import split_text

TINY = [
    *[a for a in SMALL if not a.startswith("trainer.sample_tokens=")],
    "trainer.sample_tokens=0",
    "trainer.max_steps=2",
    "trainer.eval_every=1",
    "trainer.eval_batches=1",
    "trainer.device=cpu",
    *TINY_MODEL,
]
WORDS = ["the", "of", "and", "to", "in", "a", "is", "was"]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory, repo_root: Path, shakespeare: PreparedData) -> Path:
    """Real training text (wikitext paragraphs), a one-paragraph validation text, a validation text of one-word
    lines (each word one piece of the tokenizer) and the tokenizer, trained once for the session."""
    root = tmp_path_factory.mktemp("corpus-checks")
    paragraphs = [p for p in (repo_root / "lmpt/corpora/wikitext-2-valid.txt").read_text().split("\n") if p.strip()]
    long = [p for p in paragraphs if len(p.split()) > 60]
    (root / "train.txt").write_text("\n\n".join(paragraphs[:600]) + "\n")
    (root / "paragraph.txt").write_text(long[-1] + "\n")
    words = [w for w in WORDS if len(shakespeare.tokenizer.encode(w)) == 1]
    assert len(words) >= 4
    (root / "words.txt").write_text("\n".join(words * 40) + "\n")
    shutil.copyfile(shakespeare.tokenizer.path, root / "tokenizer.model")
    return root


def refused(workspace: Path, name: str, *overrides: str) -> str:
    """Run `lmpt` with `overrides`; it must stop with exit 2 and one stderr line, before building a model,
    leaving no run directory. Returns that line."""
    run_dir = workspace / f"run-{name}"
    data = ["data.paths=[train.txt]", "tokenizer.model_file=tokenizer.model"]
    result = run_lmpt(*TINY, *data, *overrides, f"hydra.run.dir={run_dir}", cwd=workspace)
    lines = result.stderr.strip().splitlines()
    described = f"exit {result.returncode}\n--- stdout\n{result.stdout[-2000:]}\n--- stderr\n{result.stderr[-3000:]}"
    assert result.returncode == 2 and len(lines) == 1 and lines[0].startswith("lmpt: error: "), described
    assert "parameters" not in result.stdout, described  # refused before the model was built
    assert not run_dir.exists()
    return lines[0]


def test_nsp_refuses_a_one_document_validation_text(workspace: Path) -> None:
    line = refused(workspace, "nsp", "objective=nsp", "data.documents=blank_line", "data.val_paths=[paragraph.txt]")
    assert "nsp needs at least two documents; the validation text (data.val_paths=[paragraph.txt]) has 1" in line
    assert "data.documents=" in line and "objective.variant=sop" in line


def test_sop_refuses_a_validation_text_of_one_token_documents(workspace: Path) -> None:
    line = refused(
        workspace,
        "sop",
        "objective=nsp",
        "objective.variant=sop",
        "data.documents=line",
        "data.val_paths=[words.txt]",
    )
    assert "sop cuts both segments of a pair from one document" in line
    assert "no document of the validation text (data.val_paths=[words.txt]) holds two tokens" in line


def test_span_refuses_a_validation_text_shorter_than_its_window(workspace: Path) -> None:
    (workspace / "short.txt").write_text("A few words of held-out text.\n")
    line = refused(workspace, "span", "objective=span", "data.val_paths=[short.txt]")
    assert "the validation text" in line and "fewer than one window" in line and "data.seq_len" in line


def test_split_names_say_where_the_text_comes_from() -> None:
    data = DataConfig(paths=["a.txt", "b.txt", "c.txt", "d.txt"], val_fraction=0.1)
    assert split_text(data, "train") == "the training text (data.paths=[a.txt, b.txt, c.txt, ...])"
    assert split_text(data, "val") == (
        "the validation text (the data.val_fraction=0.1 held out of data.paths=[a.txt, b.txt, c.txt, ...])"
    )
    data.val_paths = ["held-out.txt"]
    assert split_text(data, "val") == "the validation text (data.val_paths=[held-out.txt])"
