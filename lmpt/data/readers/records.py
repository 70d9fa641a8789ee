"""Text from the column of Arrow record batches (what parquet and arrow files hold)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import pyarrow as pa

from lmpt.data.readers.text import record_document, record_text
from lmpt.errors import LmptError


def require_text_column(path: Path, schema: pa.Schema, text_field: str) -> None:
    """Refuse a file without a string column `text_field`, naming the columns it has."""
    if text_field not in schema.names:
        raise LmptError(
            f"{path} has no column '{text_field}' (its columns: {', '.join(schema.names) or 'none'}): "
            "set data.text_field to the column holding the text"
        )
    kind = schema.field(text_field).type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind)):
        raise LmptError(
            f"{path}: column '{text_field}' holds {kind}, not text: set data.text_field to the column holding the text"
        )


def batch_documents(path: Path, batches: Iterable[pa.RecordBatch], text_field: str) -> Iterator[list[str]]:
    """The sentences of every value of `text_field`, one record batch in memory at a time; a null is refused
    naming its record (1-based), as in JSONL."""
    record = 0
    for batch in batches:
        for text in batch.column(text_field).to_pylist():
            record += 1
            doc = record_document(record_text(text, f"{path}, record {record}", text_field))
            if doc:
                yield doc
