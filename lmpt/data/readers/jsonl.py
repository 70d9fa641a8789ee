"""JSON Lines (.jsonl, .jsonl.gz, .jsonl.zst): one document per record's text field, streamed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lmpt.data.readers.streams import iter_lines
from lmpt.data.readers.text import MISSING, record_document, record_text
from lmpt.errors import LmptError


def jsonl_records(path: Path) -> Iterator[tuple[str, Any]]:
    """(`path:line`, parsed record) for each non-blank line; a line that is not JSON is refused with its number."""
    for line, lineno, _ in iter_lines(path):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise LmptError(f"{path}:{lineno} is not valid JSON ({e.msg}): fix or remove that line") from None
        yield f"{path}:{lineno}", record


def jsonl_documents(path: Path, text_field: str) -> Iterator[list[str]]:
    """The sentences of each record's `text_field`."""
    for where, record in jsonl_records(path):
        value = record.get(text_field, MISSING) if isinstance(record, dict) else MISSING
        doc = record_document(record_text(value, where, text_field))
        if doc:
            yield doc
