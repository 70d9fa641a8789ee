"""A warm launch reads no text: file hashes are remembered by (path, size, mtime); data.verify=full re-hashes."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import lmpt.data.fingerprint as fingerprint_module
import lmpt.data.split as split_module
from lmpt.config.schema import DataConfig, TokenizerConfig
from lmpt.data.cache import PreparedData, prepare_corpora


def _text(word: str) -> bytes:
    return "".join(f"{word} number {i} speaks. Another sentence follows.\n" for i in range(600)).encode()


def _prepare(path: Path, cache: Path, tokenizer: Path, verify: str = "stat") -> PreparedData:
    data = DataConfig(paths=[str(path)], documents="line", verify=verify)
    return prepare_corpora(data, TokenizerConfig(model_file=str(tokenizer)), path.parent, cache)


def _no_reading(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_args, **_kwargs):
        raise AssertionError("a warm launch read text")

    monkeypatch.setattr(split_module, "iter_documents", refuse)
    monkeypatch.setattr(fingerprint_module, "_content_sha256", refuse)


def test_a_warm_launch_reads_no_text_and_verify_full_rehashes(shakespeare, tmp_path, monkeypatch) -> None:
    corpus, cache, tokenizer = tmp_path / "corpus.txt", tmp_path / "cache", shakespeare.tokenizer.path
    corpus.write_bytes(_text("Alpha"))
    cold = _prepare(corpus, cache, tokenizer)
    assert not cold.reused

    stamp = corpus.stat()
    corpus.write_bytes(_text("Gamma"))  # same size, and the old modification time put back
    os.utime(corpus, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    with monkeypatch.context() as m:
        _no_reading(m)
        warm = _prepare(corpus, cache, tokenizer)
    assert warm.reused and warm.cache_dir == cold.cache_dir  # the stat matched: not one byte was read

    full = _prepare(corpus, cache, tokenizer, verify="full")  # re-hashed: the new text gets its own cache
    assert not full.reused and full.cache_dir != cold.cache_dir
    assert not np.array_equal(np.asarray(full.train.tokens), np.asarray(cold.train.tokens))
    with monkeypatch.context() as m:
        _no_reading(m)
        assert _prepare(corpus, cache, tokenizer).cache_dir == full.cache_dir  # the new hash is remembered


def test_a_touched_file_is_hashed_again_and_keeps_its_cache(shakespeare, tmp_path) -> None:
    corpus, cache, tokenizer = tmp_path / "corpus.txt", tmp_path / "cache", shakespeare.tokenizer.path
    corpus.write_bytes(_text("Beta"))
    first = _prepare(corpus, cache, tokenizer)
    os.utime(corpus, ns=(0, 10**18))  # a new modification time, the same bytes: keyed by content
    again = _prepare(corpus, cache, tokenizer)
    assert again.reused and again.cache_dir == first.cache_dir
    assert len(list((cache / "fingerprints").glob("*.json"))) == 2
