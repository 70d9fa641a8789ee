"""Open a file as a stream of bytes, decompressing .gz and .zst on the fly (never to disk), and read
its lines with bounded memory: invalid UTF-8 and over-long lines are refused naming the file."""

from __future__ import annotations

import gzip
import io
import itertools
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import zstandard

from lmpt.data.readers.zstd import ZstdFrames
from lmpt.errors import LmptError

COMPRESSIONS = (".gz", ".zst")
MAX_LINE_BYTES = 16 << 20
"""A line longer than this is refused (a file without newlines would otherwise be read whole)."""
_BROKEN = (EOFError, OSError, zlib.error, zstandard.ZstdError)


def compression_of(path: Path) -> str:
    """ ".gz", ".zst" or "" (not compressed), from the file name."""
    name = path.name.lower()
    return next((c for c in COMPRESSIONS if name.endswith(c)), "")


@contextmanager
def open_bytes(path: Path) -> Iterator[io.BufferedIOBase]:
    """The decompressed bytes of `path` as a binary stream; a corrupt .gz or .zst becomes one LmptError."""
    compression = compression_of(path)
    with open(path, "rb") as raw:
        if compression == ".gz":
            stream: io.BufferedIOBase = gzip.GzipFile(fileobj=raw, mode="rb")
        elif compression == ".zst":
            stream = io.BufferedReader(ZstdFrames(raw))
        else:
            stream = raw
        try:
            yield stream
        except _BROKEN as e:
            if not compression:
                raise
            raise LmptError(
                f"{path} is not a valid {compression} file ({type(e).__name__}: {e}): it is corrupt or truncated; "
                "re-create or remove it"
            ) from None


def iter_lines(path: Path) -> Iterator[tuple[str, int, int]]:
    """(decoded line, 1-based line number, byte offset of its start in the decompressed text) of `path`,
    streamed."""
    offset = 0
    with open_bytes(path) as f:
        for lineno in itertools.count(1):
            raw = f.readline(MAX_LINE_BYTES + 1)
            if not raw:
                return
            if len(raw) > MAX_LINE_BYTES:
                raise LmptError(
                    f"{path}: line {lineno} (at byte {offset}) is longer than {MAX_LINE_BYTES >> 20} MiB: "
                    "the text needs line breaks (or one JSON record per line)"
                )
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise LmptError(
                    f"{path} is not valid UTF-8 at byte {offset + e.start} (line {lineno}): convert it to UTF-8"
                ) from None
            yield line, lineno, offset
            offset += len(raw)
