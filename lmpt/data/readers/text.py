"""Plain text (.txt, .md, .text, also .gz/.zst): lines split into documents by `data.documents`."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from pathlib import Path

from lmpt.data.readers.streams import iter_lines
from lmpt.errors import LmptError

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_AUTO_SNIFF_LINES = 2000  # a wikitext heading in the first lines makes `auto` read the file as wikitext


def split_sentences(paragraph: str) -> list[str]:
    """Sentences of one paragraph: split after . ! or ? followed by whitespace."""
    return [s for s in (part.strip() for part in _SENTENCE_END.split(paragraph)) if s]


def is_wikitext_heading(line: str) -> bool:
    """True for an article heading ` = Title = ` (one '=' each side, not a `= = Section = =`)."""
    s = line.strip()
    return (
        len(s) > 4 and s.startswith("= ") and s.endswith(" =") and not s.startswith("= =") and not (s.endswith("= ="))
    )


def _lines(path: Path) -> Iterator[str]:
    return (line for line, _, _ in iter_lines(path))


def _looks_like_wikitext(path: Path) -> bool:
    return any(is_wikitext_heading(line) for line in itertools.islice(_lines(path), _AUTO_SNIFF_LINES))


def _blank_line_documents(path: Path) -> Iterator[list[str]]:
    doc: list[str] = []
    for line in _lines(path):
        s = line.strip()
        if s:
            doc.append(s)
        elif doc:
            yield doc
            doc = []
    if doc:
        yield doc


def _wikitext_documents(path: Path) -> Iterator[list[str]]:
    doc: list[str] = []
    for line in _lines(path):
        if is_wikitext_heading(line):
            if doc:
                yield doc
            doc = [line.strip()]  # the heading stays in the text, as in WikiText itself
        else:
            doc.extend(split_sentences(line))
    if doc:
        yield doc


def _story_documents(path: Path) -> Iterator[list[str]]:
    """TinyStories' layout: blank lines separate a story's paragraphs, and a line followed directly by another
    (no blank line between) ends its story, so a story of one line is a document of its own."""
    doc: list[str] = []
    after_blank = True  # the file's first line starts a story
    for line in _lines(path):
        s = line.strip()
        if not s:
            after_blank = True
            continue
        if not after_blank and doc:
            yield doc
            doc = []
        doc.extend(split_sentences(s))
        after_blank = False
    if doc:
        yield doc


def _line_documents(path: Path) -> Iterator[list[str]]:
    for line in _lines(path):
        sentences = split_sentences(line)
        if sentences:
            yield sentences


def _file_document(path: Path) -> Iterator[list[str]]:
    doc = [s for s in (line.strip() for line in _lines(path)) if s]
    if doc:
        yield doc


def text_documents(path: Path, documents: str) -> Iterator[list[str]]:
    """Documents of a text file under `documents` (auto, blank_line, wikitext, line, file or stories)."""
    mode = documents
    if mode == "auto":
        mode = "wikitext" if _looks_like_wikitext(path) else "blank_line"
    if mode == "blank_line":
        return _blank_line_documents(path)
    if mode == "wikitext":
        return _wikitext_documents(path)
    if mode == "line":
        return _line_documents(path)
    if mode == "stories":
        return _story_documents(path)
    return _file_document(path)


MISSING = object()
"""A record without the text field at all (a JSONL object lacking the key)."""


def record_text(value: object, where: str, text_field: str) -> str:
    """A record's `text_field` value, which every record format requires to be a string: a null (JSONL null,
    a parquet or arrow null), a missing field or another type is refused naming the file and the record."""
    if isinstance(value, str):
        return value
    what = f"it holds {type(value).__name__}"
    what = "it is null" if value is None else "it is missing" if value is MISSING else what
    raise LmptError(
        f"{where} has no string field '{text_field}' ({what}): remove that record, or set data.text_field to the "
        "field holding the text"
    )


def record_document(text: str) -> list[str]:
    """The sentences of one record's text (jsonl, parquet, arrow): every line split into sentences."""
    return [s for para in text.splitlines() for s in split_sentences(para)]
