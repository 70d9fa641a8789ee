"""CorpusWriter: append tokenised documents of one split to its files, streaming (see corpus.py)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from lmpt.data.corpus import split_files
from lmpt.data.tokenize_worker import EncodedDocs


def _exclusive_cumsum(x: np.ndarray) -> np.ndarray:
    return np.concatenate(([0], np.cumsum(x)[:-1])).astype(np.int64)


class CorpusWriter:
    """Appends encoded documents to a split's files; only running counts stay in memory."""

    def __init__(self, directory: Path, split: str, dtype: np.dtype) -> None:
        files = split_files(directory, split)
        self._tokens = open(files["tokens"], "wb")
        self._doc_offsets = open(files["doc_offsets"], "wb")
        self._sent_offsets = open(files["sent_offsets"], "wb")
        self._doc_sent_offsets = open(files["doc_sent_offsets"], "wb")
        self._dtype = dtype
        self.n_tokens = 0
        self.n_docs = 0
        self.n_sentences = 0

    def add(self, docs: EncodedDocs) -> None:
        """Append consecutive documents (their ids already carry an eos after each)."""
        n_docs = len(docs.doc_sentences)
        if n_docs == 0:
            return
        doc_lengths = np.add.reduceat(docs.sentence_lengths, _exclusive_cumsum(docs.doc_sentences)) + 1
        doc_index = np.repeat(np.arange(n_docs, dtype=np.int64), docs.doc_sentences)
        # a sentence starts after the sentences before it plus one eos per earlier document
        sentence_starts = self.n_tokens + _exclusive_cumsum(docs.sentence_lengths) + doc_index
        self._doc_offsets.write((self.n_tokens + _exclusive_cumsum(doc_lengths)).tobytes())
        self._doc_sent_offsets.write((self.n_sentences + _exclusive_cumsum(docs.doc_sentences)).tobytes())
        self._sent_offsets.write(sentence_starts.tobytes())
        self._tokens.write(docs.ids.astype(self._dtype, copy=False).tobytes())
        self.n_tokens += len(docs.ids)
        self.n_docs += n_docs
        self.n_sentences += len(docs.sentence_lengths)

    def close(self) -> dict[str, int]:
        """Write the final end entries, flush, and return the counts for meta.json."""
        self._doc_offsets.write(np.int64(self.n_tokens).tobytes())
        self._doc_sent_offsets.write(np.int64(self.n_sentences).tobytes())
        self._sent_offsets.write(np.int64(self.n_tokens).tobytes())
        for f in (self._tokens, self._doc_offsets, self._sent_offsets, self._doc_sent_offsets):
            f.flush()
            os.fsync(f.fileno())  # durable before meta.json declares the cache complete
            f.close()
        return {"n_tokens": self.n_tokens, "n_docs": self.n_docs, "n_sentences": self.n_sentences}
