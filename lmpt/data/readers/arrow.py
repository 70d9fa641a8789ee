"""The Arrow-backed formats, read one record batch at a time with pyarrow: parquet (FineWeb, C4 shards: only the
text column is read) and the Arrow files of a Hugging Face dataset written by `save_to_disk` (Arrow IPC streams; IPC
files in the random-access format are read too; the `datasets` package is not needed)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from lmpt.data.readers.text import record_document, record_text
from lmpt.errors import LmptError

_FILE_MAGIC = b"ARROW1"


def _batches(reader: pa.ipc.RecordBatchFileReader) -> Iterator[pa.RecordBatch]:
    for i in range(reader.num_record_batches):
        yield reader.get_batch(i)


def arrow_documents(path: Path, text_field: str) -> Iterator[list[str]]:
    """One document per row's `text_field`; the file is memory-mapped, so only touched batches are read."""
    try:
        with pa.memory_map(str(path)) as source:
            if source.read(len(_FILE_MAGIC)) == _FILE_MAGIC:
                source.seek(0)
                file_reader = pa.ipc.open_file(source)
                require_text_column(path, file_reader.schema, text_field)
                yield from batch_documents(path, _batches(file_reader), text_field)
                return
            source.seek(0)
            stream = pa.ipc.open_stream(source)
            require_text_column(path, stream.schema, text_field)
            yield from batch_documents(path, stream, text_field)
    except (pa.ArrowException, OSError) as e:
        raise LmptError(f"{path} is not a readable Arrow file ({e}): re-create or remove it") from None


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


BATCH_ROWS = 1024


def parquet_documents(path: Path, text_field: str) -> Iterator[list[str]]:
    """One document per row's `text_field`; only that column is read, a batch of rows at a time."""
    try:
        with pq.ParquetFile(path) as parquet:
            require_text_column(path, parquet.schema_arrow, text_field)
            yield from batch_documents(path, parquet.iter_batches(BATCH_ROWS, columns=[text_field]), text_field)
    except (pa.ArrowException, OSError) as e:
        raise LmptError(f"{path} is not a readable parquet file ({e}): re-create or remove it") from None
