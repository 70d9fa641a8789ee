"""Measure lmpt's quality stage (docs/data_quality.md): dedup precision and recall on a synthetic corpus with
planted duplicates (exact copies, and near copies with 5, 10, 15 and 20% of their words replaced), and the
throughput in MB/s of each step alone on `--workers` processes.

    python scripts/bench_quality.py [--docs 4000] [--workers 2] [--out bench_quality.json]"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lmpt.config.quality_schema import C4_RULES, GOPHER_QUALITY_RULES, GOPHER_REPETITION_RULES, QualityConfig
from lmpt.downstream.run_tasks import read_task_items
from lmpt.quality.record import jsonl_lines
from lmpt.quality.stage import QualityStage

EDIT_RATES = (0.05, 0.10, 0.15, 0.20)
STOP = "the of and to in a is that for it as was with be by on not he this are or his from at which but".split()


def make_corpus(n: int, seed: int) -> tuple[list[str], list[str], list[int]]:
    """`n` distinct documents of made-up words with common stop words mixed in, then an exact copy of 10% of
    them and a near copy of 5% at each edit rate, shuffled: (texts, kinds, the original each one copies)."""
    rng = random.Random(seed)
    vocab = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9))) for _ in range(20000)]
    pick = lambda: rng.choice(STOP) if rng.random() < 0.3 else rng.choice(vocab)

    def document() -> str:
        sentences = [" ".join(pick() for _ in range(rng.randint(8, 20))).capitalize() + "." for _ in range(12)]
        return "\n".join(sentences)

    docs = [(document(), "original", i) for i in range(n)]
    copies = [(docs[i][0], "exact", i) for i in rng.sample(range(n), n // 10)]
    for rate in EDIT_RATES:
        for i in rng.sample(range(n), n // 20):
            lines = [line.split(" ") for line in docs[i][0].split("\n")]
            flat = [(a, b) for a, line in enumerate(lines) for b in range(len(line))]
            for a, b in rng.sample(flat, round(len(flat) * rate)):
                lines[a][b] = pick()
            copies.append(("\n".join(" ".join(line) for line in lines), f"near {rate:.0%}", i))
    everything = docs + copies
    rng.shuffle(everything)  # a copy may come before its original: which one of a pair goes is up to the dedup
    return [t for t, _, _ in everything], [k for _, k, _ in everything], [g for _, _, g in everything]


def _run(cfg: QualityConfig, docs: list[str], root: Path, tasks: list | None = None) -> tuple[dict[str, Any], Path]:
    items = lambda: (("train", doc.split("\n")) for doc in docs)
    stage = QualityStage(cfg, tasks or [])
    fingerprint, _ = stage.apply("bench", [items], root)
    work = root / "quality" / fingerprint[:32]
    stage.run(work, [items])
    return json.loads((work / "prepare" / "quality.json").read_text()), work


def _removed_ids(work: Path, steps: tuple[str, ...]) -> set[int]:
    return {int(doc["id"].split("/")[1]) for step in steps for doc in jsonl_lines(work / "removed" / step)}


def score(removed: set[int], kinds: list[str], groups: list[int]) -> dict[str, float]:
    """A group is an original with its copies; the ideal removes all but one of each. Right removals: up to
    size - 1 per group; precision = right / removed, recall = right / sum(size - 1). A copy counts as found
    when it or its original is removed while the other is kept (recall per kind)."""
    members: dict[int, list[int]] = {}
    for i, g in enumerate(groups):
        members.setdefault(g, []).append(i)
    right = sum(min(len(removed.intersection(m)), len(m) - 1) for m in members.values())
    wanted = sum(len(m) - 1 for m in members.values())
    original = {g: next(i for i in m if kinds[i] == "original") for g, m in members.items()}
    row = {
        "removed": len(removed),
        "planted": wanted,
        "precision": right / max(1, len(removed)),
        "recall": right / max(1, wanted),
    }
    for kind in ["exact", *(f"near {r:.0%}" for r in EDIT_RATES)]:
        copies = [i for i, k in enumerate(kinds) if k == kind]
        found = sum((i in removed) != (original[groups[i]] in removed) for i in copies)
        row[f"recall {kind}"] = found / max(1, len(copies))
    return row


def precision_recall(docs: list[str], kinds: list[str], groups: list[int], root: Path, workers: int) -> list[dict]:
    rows = []
    for label, ngram, threshold in (
        ("5-grams, threshold 0.72 (14x8)", 5, 0.72),
        ("3-grams, threshold 0.5", 3, 0.5),
        ("2-grams, threshold 0.4", 2, 0.4),
    ):
        cfg = QualityConfig(
            exact_dedup=True,
            minhash=True,
            minhash_ngram=ngram,
            minhash_threshold=threshold,
            workers=workers,
            shard_docs=1000,
        )
        _, work = _run(cfg, docs, root)
        row = score(_removed_ids(work, ("exact_dedup", "minhash")), kinds, groups)
        rows.append({"setting": label, **{k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}})
    return rows


def throughput(docs: list[str], root: Path, workers: int) -> list[dict[str, Any]]:
    cloze = [read_task_items("bundled:shakespeare-cloze", "bench")]
    steps: list[tuple[str, dict[str, Any]]] = [
        ("exact dedup", {"exact_dedup": True}),
        ("minhash dedup (5-grams, 14x8)", {"minhash": True}),
        ("gopher repetition (all rules)", {"gopher_repetition": list(GOPHER_REPETITION_RULES)}),
        ("gopher quality (all rules)", {"gopher_quality": list(GOPHER_QUALITY_RULES)}),
        ("c4 (all rules)", {"c4": list(C4_RULES)}),
        ("decontamination (13-grams)", {"decontaminate": True}),
        (
            "web (everything)",
            {
                "exact_dedup": True,
                "minhash": True,
                "gopher_repetition": list(GOPHER_REPETITION_RULES),
                "gopher_quality": list(GOPHER_QUALITY_RULES),
                "c4": list(C4_RULES),
                "decontaminate": True,
            },
        ),
    ]
    rows = []
    for name, keys in steps:
        started = time.perf_counter()
        record, _ = _run(QualityConfig(**keys, workers=workers, shard_docs=1000), docs, root, cloze)
        total = time.perf_counter() - started
        mb = record["bytes_before"] / 1e6
        rows.append(
            {
                "step": name,
                "MB": round(mb, 2),
                "seconds": round(record["seconds"], 2),
                "MB/s": round(mb / record["seconds"], 2),
                "MB/s with input writing": round(mb / total, 2),
                "kept": record["documents_after"],
                "of": record["documents_before"],
            }
        )
    return rows


def main(argv: Iterator[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=4000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    docs, kinds, groups = make_corpus(args.docs, args.seed)
    root = Path(tempfile.mkdtemp(prefix="bench-quality-"))
    try:
        result = {
            "documents": len(docs),
            "MB": round(sum(len(d.encode()) for d in docs) / 1e6, 2),
            "dedup": precision_recall(docs, kinds, groups, root, args.workers),
            "throughput": throughput(docs, root, args.workers),
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
