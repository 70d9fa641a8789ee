"""What each tokenising process runs: receive the tokenizer once, then encode chunks of documents."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lmpt.tokenizer.base import Tokenizer

_tokenizer: Tokenizer | None = None
_eos = 3
_threads = 1


@dataclass
class EncodedDocs:
    """Consecutive documents of one split, encoded: ids with an eos after each document."""

    ids: np.ndarray  # uint32, every document's sentences then eos
    sentence_lengths: np.ndarray  # int64 tokens per sentence
    doc_sentences: np.ndarray  # int64 sentences per document


def init_worker(tokenizer: Tokenizer, eos_id: int, threads: int = 1) -> None:
    """Pool initializer: one tokenizer per process; `threads` > 1 only when there is no pool."""
    global _tokenizer, _eos, _threads
    _tokenizer = tokenizer
    _eos = eos_id
    _threads = threads


def encode_chunk(chunk: list[tuple[str, list[str]]]) -> tuple[dict[str, EncodedDocs], int]:
    """Encode (split, sentences) documents grouped by split, order kept; also the characters consumed."""
    assert _tokenizer is not None, "init_worker was not called"
    encoded = iter(_tokenizer.encode_batch([s for _, doc in chunk for s in doc], threads=_threads))
    ids: dict[str, list[int]] = {}
    lengths: dict[str, list[int]] = {}
    counts: dict[str, list[int]] = {}
    n_chars = 0
    for split, doc in chunk:
        split_ids = ids.setdefault(split, [])
        split_lengths = lengths.setdefault(split, [])
        for sentence in doc:
            pieces = next(encoded)
            split_ids.extend(pieces)
            split_lengths.append(len(pieces))
            n_chars += len(sentence) + 1
        split_ids.append(_eos)
        counts.setdefault(split, []).append(len(doc))
    out = {
        split: EncodedDocs(
            ids=np.array(ids[split], dtype=np.uint32),
            sentence_lengths=np.array(lengths[split], dtype=np.int64),
            doc_sentences=np.array(counts[split], dtype=np.int64),
        )
        for split in ids
    }
    return out, n_chars


def encode_shard_chunk(
    task: tuple[int, int, list[tuple[str, list[str]]]],
) -> tuple[int, int, dict[str, EncodedDocs], int]:
    """encode_chunk for a chunk of shard `ordinal` of source `source`: (ordinal, source, encoded, characters)."""
    ordinal, source, chunk = task
    encoded, n_chars = encode_chunk(chunk)
    return ordinal, source, encoded, n_chars
