"""JSON Lines (.jsonl, .jsonl.gz, .jsonl.zst): one document per record's text field, streamed."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lmpt.data.readers.streams import iter_lines
from lmpt.data.readers.text import MISSING, record_document, record_text
from lmpt.errors import LmptError


def parse_line(line: str, where: str) -> Any:
    """One JSON value; a line that is not JSON, nests deeper than Python recurses or holds an integer longer than
    Python converts is refused naming `where` (never a RecursionError or ValueError)."""
    try:
        return json.loads(line)
    except json.JSONDecodeError as e:
        raise LmptError(f"{where} is not valid JSON ({e.msg}): fix or remove that line") from None
    except RecursionError:
        raise LmptError(f"{where} is JSON nested too deeply to read: flatten or remove that line") from None
    except ValueError:  # int(): more digits than sys.get_int_max_str_digits()
        raise LmptError(
            f"{where} holds an integer of more than {sys.get_int_max_str_digits()} digits: write it as a string, or "
            "remove that line"
        ) from None


def shown(value: object, width: int = 40) -> str:
    """`value` as JSON, cut to `width` characters, for a message; any value (bytes, a date, a deep list) shows."""
    try:
        text = json.dumps(value, default=repr)
    except (RecursionError, ValueError):
        text = f"<{type(value).__name__}>"
    return text[:width]


def jsonl_records(path: Path) -> Iterator[tuple[str, Any]]:
    """(`path:line`, parsed record) for each non-blank line (`parse_line`); a leading byte-order mark is skipped."""
    for line, lineno, _ in iter_lines(path):
        if lineno == 1:
            line = line.removeprefix("\ufeff")
        if not line.strip():
            continue
        yield f"{path}:{lineno}", parse_line(line, f"{path}:{lineno}")


def jsonl_documents(path: Path, text_field: str) -> Iterator[list[str]]:
    """The sentences of each record's `text_field`."""
    for where, record in jsonl_records(path):
        value = record.get(text_field, MISSING) if isinstance(record, dict) else MISSING
        doc = record_document(record_text(value, where, text_field))
        if doc:
            yield doc
