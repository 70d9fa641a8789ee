"""A .zst file as a raw byte stream that notices truncation: zstandard's stream_reader ends silently
when the last frame is cut short, so frames are decoded with its decompressobj, which reports `eof`."""

from __future__ import annotations

import io
from typing import BinaryIO

import zstandard

_READ_BYTES = 1 << 17


class ZstdFrames(io.RawIOBase):
    """Decompressed bytes of every frame of `raw`, in order; a truncated last frame raises ZstdError."""

    def __init__(self, raw: BinaryIO) -> None:
        self._raw = raw
        self._dctx = zstandard.ZstdDecompressor()
        self._frame = self._dctx.decompressobj()
        self._pending = memoryview(b"")
        self._started = False  # bytes of a frame seen since the last complete one

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        """Fill `buffer` with the next decompressed bytes; 0 at the end of the last complete frame."""
        while not self._pending:
            compressed = self._raw.read(_READ_BYTES)
            if not compressed:
                if self._started:
                    raise zstandard.ZstdError("the data ends inside a frame")
                return 0
            self._pending = memoryview(self._decompress(compressed))
        n = min(len(buffer), len(self._pending))
        buffer[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n

    def _decompress(self, compressed: bytes) -> bytes:
        out = []
        while compressed:
            self._started = True
            out.append(self._frame.decompress(compressed))
            if not self._frame.eof:
                break
            self._started = False
            compressed = self._frame.unused_data  # the next frame starts here
            self._frame = self._dctx.decompressobj()
        return b"".join(out)
