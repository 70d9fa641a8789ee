"""Parquet (FineWeb, C4 shards): the text column read one record batch at a time with pyarrow."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from lmpt.data.readers.records import batch_documents, require_text_column
from lmpt.errors import LmptError

BATCH_ROWS = 1024


def parquet_documents(path: Path, text_field: str) -> Iterator[list[str]]:
    """One document per row's `text_field`; only that column is read, a batch of rows at a time."""
    try:
        with pq.ParquetFile(path) as parquet:
            require_text_column(path, parquet.schema_arrow, text_field)
            yield from batch_documents(path, parquet.iter_batches(BATCH_ROWS, columns=[text_field]), text_field)
    except (pa.ArrowException, OSError) as e:
        raise LmptError(f"{path} is not a readable parquet file ({e}): re-create or remove it") from None
