"""A deduplicating quality stage and the held-out text: a corpus the stage mostly removes is said in one line, with
the counts, and held-out documents that copy a kept training document leave validation (all of them: refused)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from runner import lmpt_env, run_lmpt

from lmpt.config.quality_schema import QualityConfig
from lmpt.errors import LmptError
from lmpt.quality.held_out import find_copies, kept_held_out, report_copies
from lmpt.quality.stage import QualityStage


def _documents(n: int, seed: int) -> list[list[str]]:
    """n distinct documents of made-up words, two lines each."""
    rng = random.Random(seed)
    word = lambda: "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9)))
    return [[" ".join(word() for _ in range(30)) + ".", " ".join(word() for _ in range(30)) + "."] for _ in range(n)]


def _items(train: list[list[str]], val: list[list[str]]):
    return lambda: iter([*(("train", d) for d in train), *(("val", d) for d in val)])


def test_held_out_copies_of_kept_documents_are_found_and_left_out() -> None:
    kept, other = _documents(3, seed=1), _documents(2, seed=2)
    source = _items(kept, [kept[0], other[0], kept[0], other[1]])
    copies = find_copies(("\n".join(doc) for doc in kept), [source])
    assert (copies.held_out, copies.copies) == ((4,), (2,))
    assert [doc for _, doc in kept_held_out(source, copies)] == [other[0], other[1]]
    with pytest.raises(LmptError, match="all 2 held-out documents of source 2 of 2 are copies of kept training"):
        report_copies(find_copies(("\n".join(doc) for doc in kept), [source, _items([], [kept[1], kept[2]])]))


def test_a_corpus_of_copies_warns_with_its_counts_and_its_validation_loses_the_copies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    originals, fresh = _documents(4, seed=3), _documents(3, seed=4)
    train = [originals[i % 4] for i in range(60)]  # 4 documents, 15 times each: 4 of 60 kept
    source = _items(train, [originals[1], fresh[0], originals[2], fresh[1], fresh[2]])
    stage = QualityStage(QualityConfig(exact_dedup=True, workers=1), [])
    _, (items,) = stage.apply("corpus", [source], tmp_path)
    read = list(items())
    assert [doc for split, doc in read if split == "val"] == fresh  # the copies of kept documents left out
    assert sorted(doc for split, doc in read if split == "train") == sorted(originals)
    out = " ".join(capsys.readouterr().out.split())
    assert "WARNING quality kept 4 of 60 documents (6.7%)" in out
    assert "WARNING quality: 2 of 5 held-out documents are exact copies of kept training documents" in out
    record = json.loads(next(tmp_path.glob("quality/*/prepare/quality.json")).read_text())
    assert (record["held_out_documents"], record["held_out_copies"]) == (5, 2)

    _, (again,) = QualityStage(QualityConfig(exact_dedup=True, workers=1), []).apply("corpus", [source], tmp_path)
    assert list(again()) == read  # reused: the same documents, and the same lines
    out = " ".join(capsys.readouterr().out.split())
    assert "reusing quality-filtered corpus" in out and "WARNING quality kept 4 of 60" in out


def test_a_held_out_text_of_nothing_but_copies_is_refused_in_one_line(tmp_path: Path) -> None:
    docs = _documents(3, seed=5)
    text = "\n\n".join("\n".join(docs[i % 3]) for i in range(120))  # every 20th held out: all copies
    (tmp_path / "corpus.txt").write_text(text + "\n")
    env = lmpt_env(LMPT_CACHE_DIR=str(tmp_path / "cache"))
    args = [
        "tokenizer.vocab_size=512",
        "data=text",
        "data.paths=[corpus.txt]",
        "data.documents=blank_line",
        "quality.workers=1",
        "quality.exact_dedup=true",
    ]
    done = run_lmpt(*args, cwd=tmp_path, env=env, command="lmpt-prepare")
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert done.stderr.strip().count("\n") == 0 and "Traceback" not in done.stderr
    assert "all 6 held-out documents are copies of kept training documents" in done.stderr
    assert "data.val_paths" in done.stderr
    assert "quality kept 3 of 114 documents (2.6%)" in " ".join(done.stdout.split())
