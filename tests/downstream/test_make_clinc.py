"""scripts/make_clinc.py: the same bytes on every build, queries labelled by their intent's domain, the training
subset per intent, out-of-scope queries left out; and the shipped task is what lmpt-finetune reads."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from lmpt.downstream.bundled import tasks_dir

REPO = Path(__file__).resolve().parents[2]


def _source(root: Path) -> Path:
    data = root / "data"
    data.mkdir(parents=True)
    domains = {"travel": ["translate", "book_flight"], "banking": ["balance"]}
    train = [[f"{intent} query {i}", intent] for intent in ("translate", "balance", "book_flight") for i in range(25)]
    full = {
        "train": train,
        "val": [["how much is in my account", "balance"]],
        "test": [["say hi in french", "translate"], ["fly me to rome", "book_flight"]],
        "oos_train": [["what is the weather", "oos"]],
        "oos_val": [],
        "oos_test": [],
    }
    (data / "domains.json").write_text(json.dumps(domains), encoding="utf-8")
    (data / "data_full.json").write_text(json.dumps(full), encoding="utf-8")
    return data


def _build(source: Path, out: Path) -> dict[str, bytes]:
    subprocess.run(
        [sys.executable, str(REPO / "scripts" / "make_clinc.py"), str(source), "--out", str(out)],
        check=True,
        capture_output=True,
    )
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())}


def _records(blob: bytes) -> list[dict]:
    return [json.loads(line) for line in blob.decode("utf-8").splitlines()]


def test_a_fake_clinc_builds_domain_labels_the_same_bytes_twice(tmp_path: Path) -> None:
    source = _source(tmp_path / "src")
    first, second = _build(source, tmp_path / "a"), _build(source, tmp_path / "b")
    assert first == second
    assert set(first) == {"train.jsonl", "dev.jsonl", "test.jsonl", "README.md"}
    train = _records(first["train.jsonl"])
    assert len(train) == 60  # the first 20 of each intent's 25
    assert [r["text"] for r in train[:2]] == ["translate query 0", "translate query 1"]
    assert {r["label"] for r in train} == {"travel", "banking"}
    assert all(r["text"].split()[0] != "oos" for r in train)
    assert _records(first["dev.jsonl"]) == [{"text": "how much is in my account", "label": "banking"}]
    assert [r["label"] for r in _records(first["test.jsonl"])] == ["travel", "travel"]
    assert b"CC BY 3.0" in first["README.md"] and b"Larson" in first["README.md"]


def test_the_shipped_task_has_ten_balanced_domains() -> None:
    folder = tasks_dir() / "clinc-domains"
    splits = {name: _records((folder / f"{name}.jsonl").read_bytes()) for name in ("train", "dev", "test")}
    assert [len(splits[n]) for n in ("train", "dev", "test")] == [3000, 3000, 4500]
    for records in splits.values():
        counts: dict[str, int] = {}
        for r in records:
            counts[r["label"]] = counts.get(r["label"], 0) + 1
        assert len(counts) == 10 and len(set(counts.values())) == 1  # 10 domains, balanced: majority 0.1
    train_texts = {r["text"] for r in splits["train"]}
    assert not train_texts & {r["text"] for r in splits["dev"]}
    assert (folder / "README.md").read_text(encoding="utf-8").count("CC BY 3.0") >= 1
