"""Corpus files in every format lmpt reads, each written by its own library (datasets, pyarrow, gzip, zstandard)."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import zstandard

from lmpt.data.sources import bundled_dir, iter_documents

N_PARAGRAPHS = 1200


def paragraphs() -> list[str]:
    """Shakespeare's speeches, one paragraph each (a line of the reference .txt, a record elsewhere)."""
    docs = iter_documents([bundled_dir() / "tinyshakespeare.txt"], "blank_line", "text")
    return [" ".join(doc) for doc, _ in zip(docs, range(N_PARAGRAPHS), strict=False)]


def lines(texts: list[str]) -> bytes:
    """`texts` as the lines of a UTF-8 text file."""
    return "".join(t + "\n" for t in texts).encode()


def _records(texts: list[str]) -> bytes:
    return "".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(texts)).encode()


def _write_parquet(path: Path, texts: list[str]) -> Path:
    table = pa.table({"id": list(range(len(texts))), "text": texts})
    pq.write_table(table, path, row_group_size=100)  # many row groups: read batch by batch
    return path


def _write_hf(path: Path, texts: list[str]) -> Path:
    datasets.Dataset.from_dict({"id": list(range(len(texts))), "text": texts}).save_to_disk(str(path), num_shards=2)
    return path


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


WRITERS: dict[str, Callable[[Path, list[str]], Path]] = {
    "txt.gz": lambda p, t: _write(p, gzip.compress(lines(t))),
    "txt.zst": lambda p, t: _write(p, zstandard.ZstdCompressor(level=3).compress(lines(t))),
    "jsonl": lambda p, t: _write(p, _records(t)),
    "jsonl.gz": lambda p, t: _write(p, gzip.compress(_records(t))),
    "jsonl.zst": lambda p, t: _write(p, zstandard.ZstdCompressor(level=3).compress(_records(t))),
    "parquet": _write_parquet,
    "hf": _write_hf,  # a directory written by datasets' save_to_disk: its .arrow files are Arrow IPC streams
}
READER = {"txt.gz": "text", "txt.zst": "text", "jsonl": "jsonl", "jsonl.gz": "jsonl", "jsonl.zst": "jsonl"}
READER |= {"parquet": "parquet", "hf": "arrow"}


def write_format(directory: Path, name: str, fmt: str, texts: list[str]) -> Path:
    """`texts` written as `fmt` under `directory`; the path to give data.paths."""
    directory.mkdir(parents=True, exist_ok=True)
    return WRITERS[fmt](directory / (name if fmt == "hf" else f"{name}.{fmt}"), texts)
