"""Text sources: turn the user's paths into files, and files into documents made of sentences."""

from __future__ import annotations

import glob
import json
import re
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

from lmpt.errors import LmptError

TEXT_SUFFIXES = (".txt", ".md", ".text", ".jsonl")
DOCUMENT_MODES = ("auto", "blank_line", "wikitext", "line", "file")
BUNDLED_PREFIX = "bundled:"
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_AUTO_SNIFF_LINES = 2000  # a wikitext heading in the first lines makes `auto` read the file as wikitext


def bundled_dir() -> Path:
    """The folder of corpora shipped inside the package."""
    return Path(str(resources.files("lmpt") / "corpora"))


def _resolve_one(pattern: str, base_dir: Path) -> list[Path]:
    if pattern.startswith(BUNDLED_PREFIX):
        name = pattern[len(BUNDLED_PREFIX) :]
        path = bundled_dir() / name
        if not path.is_file():
            shipped = ", ".join(sorted(p.name for p in bundled_dir().glob("*.txt")))
            raise LmptError(f"data path not found: {pattern} (bundled corpora: {shipped})")
        return [path]
    path = Path(pattern).expanduser()
    if not path.is_absolute():
        path = base_dir / path
    if glob.has_magic(str(path)):
        found = sorted(Path(p) for p in glob.glob(str(path), recursive=True))
        files: list[Path] = []
        for p in found:
            files.extend(_text_files_in(p) if p.is_dir() else [p])
        if not files:
            raise LmptError(f"data path not found: {pattern} (the pattern matches no file under {base_dir})")
        return files
    if path.is_dir():
        files = _text_files_in(path)
        if not files:
            raise LmptError(
                f"data directory {path} holds no text files: add {', '.join(TEXT_SUFFIXES)} files or "
                "point data.paths elsewhere"
            )
        return files
    if not path.is_file():
        raise LmptError(f"data path not found: {pattern} (looked for {path}; relative paths start at {base_dir})")
    return [path]


def _text_files_in(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("*") if p.is_file() and p.suffix.lower() in TEXT_SUFFIXES)


def resolve_paths(patterns: list[str], base_dir: Path) -> list[Path]:
    """Files named by `patterns` (files, directories searched recursively for text files, globs,
    `bundled:NAME`), relative ones resolved against `base_dir`, each file once, in a fixed order."""
    files: list[Path] = []
    seen: set[Path] = set()
    for pattern in patterns:
        for path in _resolve_one(str(pattern), base_dir):
            resolved = path.resolve()
            if resolved not in seen:  # a file named twice would be trained on twice
                seen.add(resolved)
                files.append(resolved)
    if not files:
        raise LmptError("no training text given: set data.paths to files, directories or bundled:NAME")
    return files


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
    """Decoded lines of a file, read as a stream; invalid UTF-8 is refused with its byte offset."""
    offset = 0
    with open(path, "rb") as f:
        for raw in f:
            try:
                yield raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise LmptError(f"{path} is not valid UTF-8 at byte {offset + e.start}: convert it to UTF-8") from None
            offset += len(raw)


def _looks_like_wikitext(path: Path) -> bool:
    with open(path, "rb") as f:
        for i, raw in enumerate(f):
            if i >= _AUTO_SNIFF_LINES:
                return False
            if is_wikitext_heading(raw.decode("utf-8", errors="replace")):
                return True
    return False


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


def _line_documents(path: Path) -> Iterator[list[str]]:
    for line in _lines(path):
        sentences = split_sentences(line)
        if sentences:
            yield sentences


def _file_document(path: Path) -> Iterator[list[str]]:
    doc = [s for s in (line.strip() for line in _lines(path)) if s]
    if doc:
        yield doc


def _jsonl_documents(path: Path, text_field: str) -> Iterator[list[str]]:
    for lineno, line in enumerate(_lines(path), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise LmptError(f"{path}:{lineno} is not valid JSON ({e.msg}): fix or remove that line") from None
        if not isinstance(record, dict) or not isinstance(record.get(text_field), str):
            raise LmptError(
                f"{path}:{lineno} has no string field '{text_field}': set data.text_field to the field holding the text"
            )
        doc = [s for para in record[text_field].splitlines() for s in split_sentences(para)]
        if doc:
            yield doc


def iter_documents(paths: list[Path], documents: str, text_field: str) -> Iterator[list[str]]:
    """Every document of `paths` in order, each a list of non-empty sentences, read as a stream.
    `documents` is auto, blank_line, wikitext, line or file; .jsonl files always give one document
    per record's `text_field`."""
    if documents not in DOCUMENT_MODES:
        raise LmptError(f"data.documents={documents} is unknown: use one of {', '.join(DOCUMENT_MODES)}")
    for path in paths:
        if path.suffix.lower() == ".jsonl":
            yield from _jsonl_documents(path, text_field)
            continue
        mode = documents
        if mode == "auto":
            mode = "wikitext" if _looks_like_wikitext(path) else "blank_line"
        if mode == "blank_line":
            yield from _blank_line_documents(path)
        elif mode == "wikitext":
            yield from _wikitext_documents(path)
        elif mode == "line":
            yield from _line_documents(path)
        else:
            yield from _file_document(path)
