"""Text sources: turn the user's paths into files (regular files only), and files into documents."""

from __future__ import annotations

import glob
import stat
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

from lmpt.data.readers import KNOWN_SUFFIXES, is_known, read_documents
from lmpt.errors import LmptError

BUNDLED_PREFIX = "bundled:"


def bundled_dir() -> Path:
    """The folder of corpora shipped inside the package."""
    return Path(str(resources.files("lmpt") / "corpora"))


def _require_regular(path: Path, pattern: str) -> Path:
    """`path` when it is a regular file (or a link to one); a device, pipe or socket would never end."""
    try:
        mode = path.stat().st_mode
    except OSError:
        raise LmptError(f"data path not found: {pattern} (looked for {path})") from None
    if not stat.S_ISREG(mode):
        raise LmptError(
            f"{path} (from data path {pattern}) is not a regular file: lmpt reads regular files only; "
            "point data.paths at text files"
        )
    return path


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
            files.extend(_text_files_in(p) if p.is_dir() else [_require_regular(p, pattern)])
        if not files:
            raise LmptError(f"data path not found: {pattern} (the pattern matches no file under {base_dir})")
        return files
    if path.is_dir():
        files = _text_files_in(path)
        if not files:
            raise LmptError(
                f"data directory {path} holds no text files: add {', '.join(KNOWN_SUFFIXES)} files or "
                "point data.paths elsewhere"
            )
        return files
    if not path.exists():
        raise LmptError(f"data path not found: {pattern} (looked for {path}; relative paths start at {base_dir})")
    return [_require_regular(path, pattern)]


def _text_files_in(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("*") if is_known(p) and p.is_file())


def resolve_paths(patterns: list[str], base_dir: Path) -> list[Path]:
    """Files named by `patterns` (files, directories searched recursively for text and record files, globs,
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


def iter_documents(paths: list[Path], documents: str, text_field: str) -> Iterator[list[str]]:
    """Every document of `paths` in order, each a list of non-empty sentences, read as a stream.
    `documents` (auto, blank_line, wikitext, line, file or stories) splits text files; record files (.jsonl,
    .parquet, .arrow) give one document per record's `text_field`."""
    for path in paths:
        yield from read_documents(path, documents, text_field)
