"""TokenCorpus: one split of the token cache, memory-mapped (ids plus document and sentence offsets).

Layout of a split in its directory (all little-endian, written by CorpusWriter):
  {split}.tokens.bin            ids, every document's sentences concatenated, each document + one eos
  {split}.doc_offsets.bin       int64 [n_docs+1]: doc d is [doc_offsets[d], doc_offsets[d+1]-1), eos at
                                doc_offsets[d+1]-1; the last entry is n_tokens
  {split}.sent_offsets.bin      int64 [n_sentences+1]: token offset of each sentence start, then n_tokens
  {split}.doc_sent_offsets.bin  int64 [n_docs+1]: index into sent_offsets of each doc's first sentence
and `meta.json` (shared by the splits), written last, with the dtype, the counts, and `sources`: each source's
token span [start, end) in each split, in order (one entry when the run has a single source).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

META_NAME = "meta.json"


def token_dtype(vocab_size: int) -> np.dtype:
    """The narrowest unsigned dtype that holds every id."""
    return np.dtype(np.uint16) if vocab_size <= 65535 else np.dtype(np.uint32)


def split_files(directory: Path, split: str) -> dict[str, Path]:
    """Paths of the four arrays of `split`."""
    names = ("tokens", "doc_offsets", "sent_offsets", "doc_sent_offsets")
    return {name: Path(directory) / f"{split}.{name}.bin" for name in names}


def _map(path: Path, dtype: np.dtype, count: int) -> np.ndarray:
    if count == 0:  # numpy cannot map an empty file
        return np.zeros(0, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="r", shape=(count,))


class TokenCorpus:
    """Random access to one split of the token cache; nothing is read until it is indexed."""

    def __init__(
        self,
        tokens: np.ndarray,
        doc_offsets: np.ndarray,
        sent_offsets: np.ndarray,
        doc_sent_offsets: np.ndarray,
        eos_id: int = 3,
        name: str = "",
    ) -> None:
        self.tokens = tokens
        self.doc_offsets = doc_offsets
        self.sent_offsets = sent_offsets
        self.doc_sent_offsets = doc_sent_offsets
        self.eos_id = eos_id
        self.name = name

    @classmethod
    def open(cls, directory: Path | str, split: str) -> TokenCorpus:
        """Map `split` ("train" or "val") of the cache in `directory`."""
        directory = Path(directory)
        meta = json.loads((directory / META_NAME).read_text())
        counts = meta["splits"][split]
        files = split_files(directory, split)
        n_tokens, n_docs, n_sents = counts["n_tokens"], counts["n_docs"], counts["n_sentences"]
        i64 = np.dtype(np.int64)
        return cls(
            tokens=_map(files["tokens"], np.dtype(meta["dtype"]), n_tokens),
            doc_offsets=_map(files["doc_offsets"], i64, n_docs + 1),
            sent_offsets=_map(files["sent_offsets"], i64, n_sents + 1),
            doc_sent_offsets=_map(files["doc_sent_offsets"], i64, n_docs + 1),
            eos_id=int(meta.get("eos_id", 3)),
            name=f"{directory.name}/{split}",
        )

    def __repr__(self) -> str:
        return f"TokenCorpus({self.name}, {self.n_tokens} tokens, {self.n_docs} docs)"

    @property
    def n_tokens(self) -> int:
        return int(self.tokens.shape[0])

    @property
    def n_docs(self) -> int:
        return int(self.doc_offsets.shape[0]) - 1

    @property
    def n_sentences(self) -> int:
        return int(self.sent_offsets.shape[0]) - 1

    def window(self, start: int, length: int) -> np.ndarray:
        """`length` consecutive ids from `start` as int64 (may cross documents and their eos)."""
        if start < 0 or length < 0 or start + length > self.n_tokens:
            raise IndexError(f"window [{start}, {start + length}) outside the corpus of {self.n_tokens} tokens")
        return np.asarray(self.tokens[start : start + length], dtype=np.int64)

    def doc_span(self, d: int) -> tuple[int, int]:
        """(start, end) of document d's tokens, end exclusive and without its eos."""
        if not 0 <= d < self.n_docs:
            raise IndexError(f"document {d} out of range: the corpus has {self.n_docs}")
        return int(self.doc_offsets[d]), int(self.doc_offsets[d + 1]) - 1

    def doc_of(self, offset: int) -> int:
        """Index of the document holding token `offset` (its eos counts as part of it)."""
        if not 0 <= offset < self.n_tokens:
            raise IndexError(f"offset {offset} outside the corpus of {self.n_tokens} tokens")
        return int(np.searchsorted(self.doc_offsets, offset, side="right")) - 1

    def docs_of(self, offsets: np.ndarray) -> np.ndarray:
        """Vectorised doc_of for an array of offsets."""
        return np.searchsorted(self.doc_offsets, np.asarray(offsets), side="right").astype(np.int64) - 1

    def sentence_starts(self, d: int) -> np.ndarray:
        """Absolute token offsets of document d's sentences (a sentence ends where the next starts;
        the last one at doc_span(d)[1])."""
        if not 0 <= d < self.n_docs:
            raise IndexError(f"document {d} out of range: the corpus has {self.n_docs}")
        first, last = int(self.doc_sent_offsets[d]), int(self.doc_sent_offsets[d + 1])
        return np.asarray(self.sent_offsets[first:last], dtype=np.int64)
