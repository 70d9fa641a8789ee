"""Arrow files of a Hugging Face dataset written by `save_to_disk` (Arrow IPC streams), read batch by batch
with pyarrow (the `datasets` package is not needed); Arrow IPC files (random-access format) are read too."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa

from lmpt.data.readers.records import batch_documents, require_text_column
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
