"""Every format lmpt reads, each written by its own library, gives exactly the tokens of the same text as .txt."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from corpus_files import READER, WRITERS, lines, paragraphs, write_format

from lmpt.config.schema import DataConfig, TokenizerConfig
from lmpt.data.cache import PreparedData, default_cache_root, prepare_corpora
from lmpt.data.readers import format_of
from lmpt.data.sources import iter_documents


def _prepare(paths: list[Path], tokenizer: Path) -> PreparedData:
    data = DataConfig(paths=[str(p) for p in paths], documents="line")
    return prepare_corpora(data, TokenizerConfig(model_file=str(tokenizer)), Path("/"), default_cache_root(None))


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory, shakespeare: PreparedData) -> tuple[Path, PreparedData]:
    txt = tmp_path_factory.mktemp("formats") / "reference.txt"
    txt.write_bytes(lines(paragraphs()))
    return txt, _prepare([txt], shakespeare.tokenizer.path)


@pytest.mark.parametrize("fmt", list(WRITERS))
def test_format_gives_the_tokens_of_the_same_text(fmt: str, reference, shakespeare, tmp_path: Path) -> None:
    txt, expected = reference
    path = write_format(tmp_path, "corpus", fmt, paragraphs())
    files = sorted(path.glob("*.arrow")) if path.is_dir() else [path]
    assert [format_of(f) for f in files] == [READER[fmt]] * (2 if fmt == "hf" else 1)
    got = _prepare([path], shakespeare.tokenizer.path)
    assert got.cache_dir != expected.cache_dir  # really built from this file, not the .txt's cache
    for split in ("train", "val"):
        mine, theirs = getattr(got, split), getattr(expected, split)
        assert mine.n_docs == theirs.n_docs > 0
        np.testing.assert_array_equal(np.asarray(mine.tokens), np.asarray(theirs.tokens))
        np.testing.assert_array_equal(np.asarray(mine.sent_offsets), np.asarray(theirs.sent_offsets))


def test_records_hold_several_lines_and_skip_empty_text(tmp_path: Path) -> None:
    texts = ["One. Two!\nThree", "", "Four"]
    table = pa.table({"text": pa.array(texts, pa.large_string())})  # a null is refused (test_bad_files.py)
    pq.write_table(table, tmp_path / "t.parquet")
    with pa.OSFile(str(tmp_path / "t.arrow"), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)  # the random-access Arrow IPC file format is read too
    expected = [["One.", "Two!", "Three"], ["Four"]]
    assert list(iter_documents([tmp_path / "t.parquet"], "auto", "text")) == expected
    assert list(iter_documents([tmp_path / "t.arrow"], "auto", "text")) == expected
