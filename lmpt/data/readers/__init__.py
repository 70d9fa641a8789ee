"""Readers: one module per file format, each turning one file into documents (lists of sentences), streamed.

Text formats (.txt, .md, .text, and their .gz/.zst) split into documents by `data.documents`; record
formats (.jsonl and its .gz/.zst, .parquet, the .arrow files of a Hugging Face `save_to_disk`) give one
document per record's `data.text_field`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from lmpt.config.schema import DOCUMENT_MODES
from lmpt.data.readers.jsonl import jsonl_documents
from lmpt.data.readers.streams import COMPRESSIONS
from lmpt.data.readers.text import text_documents
from lmpt.errors import LmptError

TEXT_SUFFIXES = (".txt", ".md", ".text")
RECORD_SUFFIXES = (".jsonl", ".parquet", ".arrow")
KNOWN_SUFFIXES = (
    *TEXT_SUFFIXES,
    ".jsonl",
    *(s + c for s in (*TEXT_SUFFIXES, ".jsonl") for c in COMPRESSIONS),
    ".parquet",
    ".arrow",
)


def format_of(path: Path) -> str:
    """The reader a file goes to: "jsonl", "parquet", "arrow" or "text" (any other name is read as text)."""
    name = path.name.lower()
    for compression in COMPRESSIONS:
        if name.endswith(compression):
            name = name[: -len(compression)]
    for fmt in ("jsonl", "parquet", "arrow"):
        if name.endswith("." + fmt):
            return fmt
    return "text"


def is_known(path: Path) -> bool:
    """True for a file a directory search picks up (a known text or record suffix)."""
    return path.name.lower().endswith(KNOWN_SUFFIXES)


def read_documents(path: Path, documents: str, text_field: str) -> Iterator[list[str]]:
    """Every document of one file, in order, each a list of non-empty sentences."""
    if documents not in DOCUMENT_MODES:
        raise LmptError(f"data.documents={documents} is unknown: use one of {', '.join(DOCUMENT_MODES)}")
    fmt = format_of(path)
    if fmt == "jsonl":
        return jsonl_documents(path, text_field)
    if fmt == "parquet":  # pyarrow loads on first use: a third of a second every launch would pay otherwise
        from lmpt.data.readers.arrow import parquet_documents

        return parquet_documents(path, text_field)
    if fmt == "arrow":
        from lmpt.data.readers.arrow import arrow_documents

        return arrow_documents(path, text_field)
    return text_documents(path, documents)
