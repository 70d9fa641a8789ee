"""scripts/make_tasks.py: the shipped tasks are what the script builds, byte for byte, from held-out text only."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from lmpt.data.readers.text import text_documents
from lmpt.data.sources import bundled_dir
from lmpt.data.split import is_held_out
from lmpt.downstream.bundled import tasks_dir

REPO = Path(__file__).resolve().parents[2]


def _build(out: Path) -> dict[str, bytes]:
    subprocess.run(
        [sys.executable, str(REPO / "scripts" / "make_tasks.py"), "--out", str(out)],
        check=True,
        capture_output=True,
        cwd=out.parent,
    )
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*.jsonl"))}


def test_the_script_rebuilds_the_shipped_tasks_byte_for_byte(tmp_path: Path) -> None:
    first = _build(tmp_path / "tasks")  # the shipped files were built by an earlier run of the script
    shipped = {
        str(p.relative_to(tasks_dir())): p.read_bytes()
        for p in sorted(tasks_dir().rglob("*.jsonl"))
        if not p.name.startswith(("blimp", "zorro")) and not p.is_relative_to(tasks_dir() / "clinc-domains")
    }
    # BLiMP's tasks come from scripts/make_blimp.py, Zorro's from make_zorro.py, clinc-domains from make_clinc.py
    assert first == shipped
    splits = (f"shakespeare-order/{split}.jsonl" for split in ("train", "dev", "test"))
    assert set(first) == {"shakespeare-cloze.jsonl", *splits}
    assert all(len(data) < 1_000_000 for data in first.values())


def test_every_scored_line_is_held_out_by_the_default_run() -> None:
    docs = list(text_documents(bundled_dir() / "tinyshakespeare.txt", "blank_line"))
    held = {line for i, doc in enumerate(docs) if is_held_out(i, 0.05) for line in doc}
    trained = {line for i, doc in enumerate(docs) if not is_held_out(i, 0.05) for line in doc}
    order = [
        json.loads(line)
        for split in ("train", "dev", "test")
        for line in (tasks_dir() / "shakespeare-order" / f"{split}.jsonl").open()
    ]
    originals = [r["text"] for r in order if r["label"] == 1]
    assert originals and all(text in held for text in originals)
    assert sum(text in trained for text in originals) < 0.05 * len(originals)  # lines repeated elsewhere only
    assert sorted(r["label"] for r in order).count(0) == len(originals)  # balanced: each line shuffled once too
    cloze = [json.loads(line) for line in (tasks_dir() / "shakespeare-cloze.jsonl").open()]
    held_ends = {re.sub(r"[^A-Za-z]*$", "", line) for line in held}  # a line up to its final word
    for record in cloze[:300]:
        filled = record["context"] + " " + record["choices"][record["label"]]
        assert any(filled.endswith(" " + end) for end in held_ends), filled
