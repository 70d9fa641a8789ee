"""Make a large corpus for the scale benchmarks: the bundled text, shuffled by paragraph and replicated until
`--gb` gigabytes of text, written as parquet shards and as jsonl.zst shards holding the same records.

Each record is one paragraph (a speaker turn of tinyshakespeare, a paragraph of WikiText-2); replica r of
the paragraphs is shuffled with seed r. Shards hold about `--shard-mb` MB of text each. The first
`--distinct` shards are written record by record; the rest are byte copies of them, in turn (writing 4 GB of
JSON and parquet in Python costs minutes of CPU that a benchmark of the reader does not need).

    python scripts/make_corpus.py --out /tmp/lmpt-4gb --gb 4
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import zstandard

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing
from lmpt.data.sources import bundled_dir, iter_documents


def paragraphs() -> list[str]:
    """Every paragraph of the two bundled corpora, once."""
    shakespeare = iter_documents([bundled_dir() / "tinyshakespeare.txt"], "blank_line", "text")
    found = ["\n".join(turn) for turn in shakespeare]
    wikitext = (bundled_dir() / "wikitext-2-valid.txt").read_text().split("\n")
    return found + [line.strip() for line in wikitext if len(line.strip()) > 1]


def shuffled(pool: list[str]) -> Iterator[str]:
    """The pool's paragraphs again and again, each replica in its own seeded order."""
    replica = 0
    while True:
        for i in np.random.default_rng(replica).permutation(len(pool)):
            yield pool[i]
        replica += 1


def write_shard(out: Path, index: int, texts: list[str], formats: list[str]) -> None:
    """One shard's records in every requested format."""
    if "parquet" in formats:
        table = pa.table({"id": np.arange(len(texts), dtype=np.int64), "text": pa.array(texts, pa.large_string())})
        pq.write_table(table, out / "parquet" / f"shard-{index:05d}.parquet", compression="zstd", row_group_size=8192)
    if "jsonl.zst" in formats:
        path = out / "jsonl.zst" / f"shard-{index:05d}.jsonl.zst"
        with open(path, "wb") as raw, zstandard.ZstdCompressor(level=3).stream_writer(raw) as f:
            f.write("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(texts)).encode())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True, help="directory for parquet/ and jsonl.zst/ shards")
    p.add_argument("--gb", type=float, default=4.0, help="gigabytes (1e9 bytes) of UTF-8 text in each format")
    p.add_argument("--shard-mb", type=float, default=128.0, help="megabytes of text per shard")
    p.add_argument("--formats", default="parquet,jsonl.zst")
    p.add_argument("--distinct", type=int, default=4, help="shards written record by record; the rest are copies")
    args = p.parse_args(argv)
    formats = args.formats.split(",")
    for fmt in formats:
        (args.out / fmt).mkdir(parents=True, exist_ok=True)
    stream, total, index, started = shuffled(paragraphs()), 0, 0, time.perf_counter()
    sizes: list[int] = []
    shard_bytes: list[int] = []
    while total < args.gb * 1e9:
        if index < args.distinct:
            texts, size = [], 0
            while size < args.shard_mb * 1e6:
                texts.append(next(stream))
                size += len(texts[-1].encode())
            write_shard(args.out, index, texts, formats)
            sizes.append(size)
        else:
            source, size = index % args.distinct, sizes[index % args.distinct]
            for fmt in formats:
                name = f"shard-{{:05d}}.{fmt}"
                shutil.copyfile(args.out / fmt / name.format(source), args.out / fmt / name.format(index))
        total, index = total + size, index + 1
        shard_bytes.append(size)
        print(f"shard {index}: {total / 1e9:.2f} GB of text ({time.perf_counter() - started:.0f}s)", flush=True)
    record = {"text_bytes": total, "shards": index, "formats": formats, "shard_text_bytes": shard_bytes}
    (args.out / "corpus.json").write_text(json.dumps(record) + "\n")  # what bench_corpus.py rates against
    print(json.dumps(record))
    return 0


if __name__ == "__main__":
    sys.exit(main())
