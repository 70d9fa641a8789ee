"""Build the bundled minimal-pairs tasks in lmpt/tasks/ from BLiMP (Warstadt et al., 2020, "BLiMP: The Benchmark of
Linguistic Minimal Pairs for English", TACL 8; github.com/alexwarstadt/blimp; CC BY 4.0), reproducibly: the same
bytes on every run from the same input (tests/downstream/test_make_blimp.py checks it). Nothing is downloaded.

- blimp (lmpt/tasks/blimp.jsonl.zst): every pair of every paradigm (67 x 1,000), paradigms in file-name order,
  pairs in file order, only the fields lmpt reads (FIELDS), zstd-compressed at a fixed level.
- blimp-fast (lmpt/tasks/blimp-fast.jsonl): the first FAST_PAIRS pairs of each paradigm (67 x 30 = 2,010), plain.
- lmpt/tasks/blimp/README.md: the attribution and licence that travel with the data.

SOURCE is a folder of BLiMP's data/*.jsonl files, or a clone of the BLiMP repository (a bare one too), whose
data/*.jsonl at HEAD are read with `git show`.

Usage: python scripts/make_blimp.py SOURCE [--out lmpt/tasks]
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

import zstandard

FIELDS = ("sentence_good", "sentence_bad", "field", "linguistics_term", "UID", "pairID")
"""What each bundled record keeps, in this order (the other BLiMP fields describe the original study's methods)."""
FAST_PAIRS = 30
"""Pairs per paradigm in blimp-fast."""
ZSTD_LEVEL = 19
ATTRIBUTION = """# BLiMP (bundled minimal pairs)

`blimp.jsonl.zst` and `blimp-fast.jsonl` (one folder up) are BLiMP, the Benchmark of Linguistic Minimal Pairs for
English: Alex Warstadt, Alicia Parrish, Haokun Liu, Anhad Mohananey, Wei Peng, Sheng-Fu Wang and Samuel R. Bowman,
Transactions of the Association for Computational Linguistics 8 (2020), 377-392, doi:10.1162/tacl_a_00321,
https://github.com/alexwarstadt/blimp.

Licence: BLiMP is distributed under the Creative Commons Attribution 4.0 International licence (CC BY 4.0,
https://creativecommons.org/licenses/by/4.0/). Changes made by lmpt (scripts/make_blimp.py): only the fields
sentence_good, sentence_bad, field, linguistics_term, UID and pairID are kept; blimp-fast keeps the first 30 pairs
of each of the 67 paradigms; the full set is zstd-compressed. The sentences themselves are unchanged.
"""


def _is_git_repo(source: Path) -> bool:
    return (source / "HEAD").is_file() or (source / ".git").exists()


def paradigm_files(source: Path) -> dict[str, str]:
    """{file name: its text} of every data/*.jsonl (a git repository, at HEAD) or *.jsonl (a folder)."""
    if not _is_git_repo(source):
        return {p.name: p.read_text(encoding="utf-8") for p in sorted(source.glob("*.jsonl"))}
    listed = subprocess.run(
        ["git", "-C", str(source), "ls-tree", "--name-only", "HEAD", "data/"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    names = sorted(n for n in listed if n.endswith(".jsonl"))
    show = ["git", "-C", str(source), "show"]
    return {
        Path(n).name: subprocess.run([*show, f"HEAD:{n}"], check=True, capture_output=True).stdout.decode("utf-8")
        for n in names
    }


def paradigm_pairs(name: str, text: str) -> list[dict]:
    """The records of one paradigm file, each cut to FIELDS; a record missing one is refused, naming it."""
    pairs = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        record = json.loads(line)
        missing = [f for f in FIELDS if f not in record]
        if missing:
            raise SystemExit(f"{name}:{lineno} has no field {', '.join(missing)}: is this BLiMP's data folder?")
        pairs.append({f: record[f] for f in FIELDS})
    if not pairs:
        raise SystemExit(f"{name} holds no pairs")
    return pairs


def jsonl_bytes(records: list[dict]) -> bytes:
    """One JSON object a line, UTF-8, fields in FIELDS order."""
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode("utf-8")


def build(source: Path, out: Path) -> dict[str, Path]:
    """Write blimp.jsonl.zst, blimp-fast.jsonl and blimp/README.md under `out`; returns {task: path}."""
    files = paradigm_files(source)
    if not files:
        raise SystemExit(f"{source} holds no .jsonl files: give BLiMP's data folder or a clone of its repository")
    paradigms = [paradigm_pairs(name, text) for name, text in sorted(files.items())]
    every = [pair for pairs in paradigms for pair in pairs]
    fast = [pair for pairs in paradigms for pair in pairs[:FAST_PAIRS]]
    out.mkdir(parents=True, exist_ok=True)
    (out / "blimp").mkdir(exist_ok=True)
    written = {"blimp": out / "blimp.jsonl.zst", "blimp-fast": out / "blimp-fast.jsonl"}
    # one frame, single-threaded, content size in the header: the same bytes for the same input and level
    compressor = zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_content_size=True, threads=0)
    written["blimp"].write_bytes(compressor.compress(jsonl_bytes(every)))
    written["blimp-fast"].write_bytes(jsonl_bytes(fast))
    (out / "blimp" / "README.md").write_text(ATTRIBUTION, encoding="utf-8", newline="\n")
    for task, path in written.items():
        print(f"{task}: {path} ({len(every if task == 'blimp' else fast):,} pairs, {path.stat().st_size:,} bytes)")
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path, help="BLiMP's data folder, or a clone of its repository")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "lmpt" / "tasks")
    args = parser.parse_args()
    build(args.source.expanduser(), args.out)


if __name__ == "__main__":
    main()
