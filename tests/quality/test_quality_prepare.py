"""`lmpt-prepare quality=...`: datatrove's dedup, filters and decontamination before the tokenizer; the settings in
the cache key; a record of what was removed; bad input refused before any cache is touched."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from runner import lmpt_env, run_lmpt


def _prepare(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = lmpt_env(LMPT_CACHE_DIR=str(cwd / "cache"))
    argv = [
        "tokenizer.vocab_size=512",
        "data=text",
        "data.paths=[corpus.txt]",
        "data.val_paths=[val.txt]",
        "data.documents=blank_line",
        "quality.workers=2",
        *args,
    ]
    return run_lmpt(*argv, cwd=cwd, env=env, command="lmpt-prepare")


def _word(rng: random.Random) -> str:
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9)))


def write_corpus(path: Path, n: int = 300, seed: int = 0) -> dict[str, int]:
    """n distinct documents of made-up words, then an exact copy of every 5th and a copy with 5% of its words
    changed of every 7th; how many of each were planted."""
    rng = random.Random(seed)
    vocab = [_word(rng) for _ in range(5000)]
    docs = [" ".join(rng.choice(vocab) for _ in range(rng.randint(80, 160))) + "." for _ in range(n)]
    out, planted = list(docs), {"exact": 0, "near": 0}
    for i, doc in enumerate(docs):
        if i % 5 == 0:
            out.append(doc)
            planted["exact"] += 1
        if i % 7 == 0:
            words = doc.split()
            for j in rng.sample(range(len(words)), len(words) // 20):
                words[j] = rng.choice(vocab)
            out.append(" ".join(words))
            planted["near"] += 1
    path.write_text("\n\n".join(out) + "\n")
    (path.parent / "val.txt").write_text("\n\n".join(" ".join(rng.choice(vocab) for _ in range(99)) for _ in range(9)))
    return planted


def _cache_line(stdout: str) -> Path:
    return Path(next(line for line in stdout.splitlines() if line.startswith("token cache: ")).split(": ")[1])


def _record(cwd: Path) -> dict:
    (found,) = list((cwd / "cache" / "quality").glob("*/prepare/quality.json"))
    return json.loads(found.read_text())


def _tree(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in sorted(root.rglob("*"))}


def test_dedup_removes_the_planted_duplicates_records_them_and_keys_the_cache(tmp_path: Path) -> None:
    planted = write_corpus(tmp_path / "corpus.txt")
    plain = _prepare(tmp_path)
    assert plain.returncode == 0, plain.stderr
    near = ("quality.minhash_ngram=3", "quality.minhash_threshold=0.5")  # 5% edits: Jaccard ~0.75 on 3-grams
    deduped = _prepare(tmp_path, "quality=dedup", *near)
    assert deduped.returncode == 0, deduped.stderr
    assert _cache_line(deduped.stdout) != _cache_line(plain.stdout)  # the settings are part of the key
    assert "data quality: what was removed and why" in deduped.stdout and "kept" in deduped.stdout

    record = _record(tmp_path)
    removed = {row["step"]: row["documents"] for row in record["removed"]}
    assert removed["exact_dedup"] == planted["exact"]
    assert planted["near"] - 2 <= removed["minhash"] <= planted["near"]  # LSH finds a pair with probability < 1
    assert record["bytes_after"] < record["bytes_before"]
    assert record["documents_after"] == record["documents_before"] - sum(removed.values())
    samples = [
        json.loads(line)
        for line in (tmp_path / "cache" / "quality").glob("*/prepare/removed.jsonl").__next__().read_text().splitlines()
    ]
    assert {s["step"] for s in samples} == {"exact_dedup", "minhash"} and all(s["text"] for s in samples)

    again = _prepare(tmp_path, "quality=dedup", *near)
    assert again.returncode == 0, again.stderr
    assert "reusing token cache" in again.stdout and "quality:" not in again.stdout  # a warm launch runs nothing
    other = _prepare(tmp_path, "quality=dedup", "quality.minhash_ngram=4", "quality.minhash_threshold=0.5")
    assert other.returncode == 0, other.stderr
    assert _cache_line(other.stdout) not in (_cache_line(deduped.stdout), _cache_line(plain.stdout))


def test_web_filters_name_each_reason_and_decontaminate_against_the_tasks(tmp_path: Path) -> None:
    rng = random.Random(1)
    task_text = "the quick brown fox jumps over the lazy dog while the farmer sleeps under an old tree"
    (tmp_path / "task.jsonl").write_text(json.dumps({"context": task_text, "choices": ["yes", "no"], "label": 0}))
    good = [f"The {_word(rng)} and the {_word(rng)} were {_word(rng)} to the {_word(rng)}. " * 12 for _ in range(60)]
    lorem = "The lorem ipsum of the text and to the end. " * 30
    contaminated = f"Text and more. {task_text.capitalize()}. " * 3  # two stop words: Gopher keeps it
    docs = [*good, lorem, contaminated, "- item\n" * 40]
    (tmp_path / "corpus.txt").write_text("\n\n".join(d.strip() for d in docs) + "\n")
    (tmp_path / "val.txt").write_text(good[0])
    result = _prepare(
        tmp_path,
        "quality=web",
        "quality.gopher_quality=[stop_words]",
        "quality.c4=[lorem_ipsum]",
        "quality.gopher_repetition=[]",
        "quality.minhash=false",
        "quality.exact_dedup=false",
        "quality.decontaminate_tasks=[task.jsonl]",
    )
    assert result.returncode == 0, result.stderr
    reasons = {(row["step"], row["reason"]) for row in _record(tmp_path)["removed"]}
    assert ("c4", "lorem_ipsum") in reasons
    assert ("decontaminate", "contaminated:task") in reasons
    assert ("gopher_quality", "gopher_enough_stop_words") in reasons  # the bullet list has no stop words


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder whose corpus was prepared with quality=dedup once: every refusal below runs against its cache (each
    checks the cache is left as it was, so one that touched it would fail itself, not the next)."""
    folder = tmp_path_factory.mktemp("prepared")
    write_corpus(folder / "corpus.txt", n=60)
    (folder / "bad.jsonl").write_text("{not json\n")
    first = _prepare(folder, "quality=dedup")
    assert first.returncode == 0, first.stderr
    return folder


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("quality.c4=[terminal_punct,no_such_rule]", "quality.c4: unknown rule 'no_such_rule'"),
        ("quality.minhash_threshold=1.5", "quality.minhash_threshold=1.5 is invalid: it must be in (0, 1]"),
        ("quality.minhash_threshold=0", "quality.minhash_threshold=0.0 is invalid: it must be in (0, 1]"),
        ("quality.decontaminate_tasks=[missing.jsonl]", "quality.decontaminate_tasks[0]: task=missing.jsonl does"),
        ("quality.decontaminate_tasks=[bad.jsonl]", "quality.decontaminate_tasks[0]: "),
    ],
)
def test_bad_input_is_one_line_exit_2_and_leaves_the_cache_alone(prepared: Path, override: str, message: str) -> None:
    before = _tree(prepared / "cache")
    result = _prepare(prepared, "quality=dedup", "quality.decontaminate=true", override)
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and message in result.stderr, result.stderr
    assert _tree(prepared / "cache") == before


@pytest.mark.soak  # ~16 s: a kill and resume of datatrove's stages
def test_a_killed_prepare_resumes_without_redoing_finished_tasks(tmp_path: Path) -> None:
    write_corpus(tmp_path / "corpus.txt", n=1500)
    args = ["quality=dedup", "quality.shard_docs=40", "quality.workers=1"]
    env = lmpt_env(LMPT_CACHE_DIR=str(tmp_path / "cache"))
    command = [
        sys.executable,
        "-m",
        "lmpt.prepare",
        "tokenizer.vocab_size=512",
        "data=text",
        "data.paths=[corpus.txt]",
        "data.val_paths=[val.txt]",
        "data.documents=blank_line",
        *args,
    ]
    process = subprocess.Popen(
        command, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    done = tmp_path / "cache" / "quality"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(list(done.glob("*/logs/minhash_signatures/completions/*"))) < 5:
        time.sleep(0.02)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    finished = {p: p.stat().st_mtime_ns for p in done.glob("*/logs/*/completions/*")}
    assert len(finished) >= 5 and not list(done.glob("*/prepare/quality.json"))  # killed part way

    resumed = _prepare(tmp_path, *args)
    assert resumed.returncode == 0, resumed.stderr
    assert all(p.stat().st_mtime_ns == mtime for p, mtime in finished.items())  # finished tasks were not run again
    (log,) = done.glob("*/logs/datatrove.log")
    assert "already completed" in log.read_text() or "Skipping" in log.read_text()

    fresh = tmp_path / "fresh"
    fresh.mkdir()
    for name in ("corpus.txt", "val.txt"):
        (fresh / name).write_text((tmp_path / name).read_text())
    assert _prepare(fresh, *args).returncode == 0
    kept = [sorted(p.read_text() for p in root.glob("cache/quality/*/kept/*.jsonl")) for root in (tmp_path, fresh)]
    assert kept[0] == kept[1]  # the resumed run kept exactly what an uninterrupted one keeps
