"""scripts/make_blimp.py: the same bytes on every build, only the kept fields, the fast subset per paradigm; and the
shipped files agree with each other."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import zstandard

from lmpt.downstream.bundled import tasks_dir
from lmpt.downstream.task import read_task
from lmpt.downstream.zero_shot_files import read_pairs

REPO = Path(__file__).resolve().parents[2]
KEPT = ["sentence_good", "sentence_bad", "field", "linguistics_term", "UID", "pairID"]


def _paradigm(uid: str, field: str, n: int) -> str:
    records = [
        {
            "sentence_good": f"{uid} good {i}.",
            "sentence_bad": f"{uid} bad {i} ü.",
            "field": field,
            "linguistics_term": "term",
            "UID": uid,
            "simple_LM_method": True,
            "lexically_identical": False,
            "pairID": str(i),
        }
        for i in range(n)
    ]
    return "".join(json.dumps(r) + "\n" for r in records)


def _build(source: Path, out: Path) -> dict[str, bytes]:
    subprocess.run(
        [sys.executable, str(REPO / "scripts" / "make_blimp.py"), str(source), "--out", str(out)],
        check=True,
        capture_output=True,
    )
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def test_a_fake_two_paradigm_input_builds_the_same_bytes_twice(tmp_path: Path) -> None:
    source = tmp_path / "data"
    source.mkdir()
    (source / "zeta_paradigm.jsonl").write_text(_paradigm("zeta_paradigm", "syntax", 35), encoding="utf-8")
    (source / "alpha_paradigm.jsonl").write_text(_paradigm("alpha_paradigm", "semantics", 3), encoding="utf-8")
    first, second = _build(source, tmp_path / "a"), _build(source, tmp_path / "b")
    assert first == second
    assert set(first) == {"blimp.jsonl.zst", "blimp-fast.jsonl", "blimp/README.md"}
    text = zstandard.ZstdDecompressor().decompress(first["blimp.jsonl.zst"])
    every = [json.loads(line) for line in text.splitlines()]
    fast = [json.loads(line) for line in first["blimp-fast.jsonl"].decode("utf-8").splitlines()]
    assert [r["UID"] for r in every] == ["alpha_paradigm"] * 3 + ["zeta_paradigm"] * 35  # paradigms by file name
    assert all(list(r) == KEPT for r in every) and every[3]["sentence_bad"] == "zeta_paradigm bad 0 ü."
    assert fast == every[:3] + every[3:33]  # the first 30 pairs of each paradigm, in file order
    assert b"CC BY 4.0" in first["blimp/README.md"] and b"Warstadt" in first["blimp/README.md"]


def test_the_shipped_tasks_are_blimp_and_its_fast_subset() -> None:
    fast_path, every_path = tasks_dir() / "blimp-fast.jsonl", tasks_dir() / "blimp.jsonl.zst"
    assert fast_path.stat().st_size < 600_000 and every_path.stat().st_size < 1_500_000
    assert (tasks_dir() / "blimp" / "README.md").is_file()
    assert read_task("bundled:blimp-fast").kind == read_task("bundled:blimp").kind == "pairs"
    fast = read_pairs("bundled:blimp-fast")
    assert len(fast) == 2010 and len({p.paradigm for p in fast}) == 67
    assert {p.field for p in fast} == {"morphology", "syntax", "semantics", "syntax_semantics"}  # one spelling a field
    assert {p.field for p in fast if p.paradigm == "principle_A_case_2"} == {"syntax_semantics"}
    head = zstandard.ZstdDecompressor().stream_reader(every_path.open("rb")).read(2_000_000).decode("utf-8")
    first_paradigm = [json.loads(line) for line in head.splitlines()[:30]]
    assert [r["sentence_good"] for r in first_paradigm] == [p.good for p in fast[:30]]
