"""The token cache: eos after each document, offsets that match direct encoding, reuse, held-out split."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from lmpt.config.schema import DataConfig, TokenizerConfig
from lmpt.data.cache import PreparedData, _build_cache, default_cache_root, prepare_corpora
from lmpt.data.corpus import TokenCorpus, token_dtype
from lmpt.data.mixture import resolve_sources
from lmpt.data.sources import bundled_dir, iter_documents
from lmpt.data.split import is_held_out, source_items
from lmpt.errors import LmptError

SMALL_TOK = TokenizerConfig(vocab_size=500, num_sentinels=4)


def _expected_doc(prepared: PreparedData, doc: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Ids of a document encoded directly, and its sentence starts relative to the document."""
    pieces = prepared.tokenizer.encode_batch(doc)
    lengths = np.array([len(p) for p in pieces])
    return np.array([i for p in pieces for i in p]), np.concatenate(([0], np.cumsum(lengths)[:-1]))


def _check_corpus_against(prepared: PreparedData, corpus: TokenCorpus, docs: list[list[str]], every: int) -> None:
    eos = prepared.tokenizer.special.eos
    assert corpus.n_docs == len(docs)
    assert int(corpus.doc_offsets[0]) == 0 and int(corpus.doc_offsets[-1]) == corpus.n_tokens
    assert int(corpus.sent_offsets[-1]) == corpus.n_tokens == corpus.tokens.shape[0]
    assert corpus.n_sentences == sum(len(d) for d in docs)
    ends = np.asarray(corpus.doc_offsets[1:]) - 1
    assert (corpus.tokens[ends] == eos).all() and int((np.asarray(corpus.tokens) == eos).sum()) == corpus.n_docs
    for d in range(0, len(docs), every):
        ids, rel_starts = _expected_doc(prepared, docs[d])
        start, end = corpus.doc_span(d)
        assert np.array_equal(corpus.window(start, end - start), ids)
        assert np.array_equal(corpus.sentence_starts(d), start + rel_starts)
        assert corpus.doc_of(start) == d and corpus.doc_of(end) == d  # the eos belongs to its document


def _split(path: Path, fraction: float = 0.05) -> tuple[list[list[str]], list[list[str]]]:
    docs = list(iter_documents([path], "auto", "text"))
    val = [d for i, d in enumerate(docs) if is_held_out(i, fraction)]
    train = [d for i, d in enumerate(docs) if not is_held_out(i, fraction)]
    return train, val


def test_wikitext_cache_matches_direct_encoding(wikitext: PreparedData) -> None:
    train, val = _split(bundled_dir() / "wikitext-2-valid.txt")
    assert len(train) == 57 and len(val) == 3
    _check_corpus_against(wikitext, wikitext.train, train, every=1)
    _check_corpus_against(wikitext, wikitext.val, val, every=1)
    assert wikitext.train.tokens.dtype == np.uint16


def test_shakespeare_split_is_disjoint_and_complete(shakespeare: PreparedData) -> None:
    train, val = _split(bundled_dir() / "tinyshakespeare.txt")
    assert len(val) > 300 and len(train) > 6000
    _check_corpus_against(shakespeare, shakespeare.train, train, every=97)
    _check_corpus_against(shakespeare, shakespeare.val, val, every=7)


def test_second_call_reuses_the_cache(shakespeare: PreparedData, repo_root: Path, capsys) -> None:
    meta = shakespeare.cache_dir / "meta.json"
    mtime = meta.stat().st_mtime_ns
    capsys.readouterr()
    again = prepare_corpora(
        DataConfig(paths=["bundled:tinyshakespeare.txt"]),
        TokenizerConfig(vocab_size=1024),
        repo_root,
        default_cache_root(None),
    )
    out = capsys.readouterr().out
    assert again.reused and again.cache_dir == shakespeare.cache_dir and meta.stat().st_mtime_ns == mtime
    assert "reusing token cache" in out and "reusing tokenizer" in out
    assert again.train.n_tokens == shakespeare.train.n_tokens
    assert json.loads(meta.read_text())["complete"] is True


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first 1500 speaker turns of Tiny Shakespeare as a file of its own."""
    folder = tmp_path_factory.mktemp("small")
    docs = list(iter_documents([bundled_dir() / "tinyshakespeare.txt"], "blank_line", "text"))[:1500]
    (folder / "turns.txt").write_text("\n\n".join("\n".join(d) for d in docs) + "\n", encoding="utf-8")
    return folder


def test_another_tokenizer_gets_another_cache(small_corpus: Path, tmp_path: Path) -> None:
    data = DataConfig(paths=["turns.txt"], tokenize_workers=1)
    unigram = prepare_corpora(data, SMALL_TOK, small_corpus, tmp_path)
    bpe_tok = TokenizerConfig(vocab_size=500, num_sentinels=4, model_type="bpe")
    bpe = prepare_corpora(data, bpe_tok, small_corpus, tmp_path)
    assert not unigram.reused and not bpe.reused
    assert unigram.cache_dir != bpe.cache_dir and unigram.train.n_docs == bpe.train.n_docs
    assert sorted(p.name for p in (tmp_path / "tokens").iterdir()) == sorted(
        [unigram.cache_dir.name, bpe.cache_dir.name]
    )


def test_parallel_and_serial_builds_are_identical(small_corpus: Path, tmp_path: Path) -> None:
    serial = prepare_corpora(
        DataConfig(paths=["turns.txt"], tokenize_workers=1), SMALL_TOK, small_corpus, tmp_path / "a"
    )
    parallel = prepare_corpora(
        DataConfig(paths=["turns.txt"], tokenize_workers=2), SMALL_TOK, small_corpus, tmp_path / "b"
    )
    assert serial.cache_dir.name == parallel.cache_dir.name  # tokenize_workers does not change the key
    for f in sorted(serial.cache_dir.glob("*.bin")):
        assert f.read_bytes() == (parallel.cache_dir / f.name).read_bytes(), f.name


def test_losing_the_build_race_keeps_the_winner(small_corpus: Path, tmp_path: Path) -> None:
    data = DataConfig(paths=["turns.txt"], tokenize_workers=1)
    first = prepare_corpora(data, SMALL_TOK, small_corpus, tmp_path)
    before = (first.cache_dir / "meta.json").read_text()
    (source,) = resolve_sources(data, small_corpus)
    items = [source_items(source, data.text_field, data.val_fraction)]
    _build_cache(first.cache_dir, items, first.tokenizer, data, source.train_paths)
    assert (first.cache_dir / "meta.json").read_text() == before
    assert [p.name for p in (tmp_path / "tokens").iterdir()] == [first.cache_dir.name]  # no temp dir left


def test_val_paths_are_the_validation_corpus(small_corpus: Path, tmp_path: Path) -> None:
    (tmp_path / "held.txt").write_text("A held-out line.\n\nAnother one.\nWith two lines.\n")
    data = DataConfig(paths=[str(small_corpus / "turns.txt")], val_paths=["held.txt"], tokenize_workers=1)
    prepared = prepare_corpora(data, SMALL_TOK, tmp_path, tmp_path / "cache")
    assert prepared.train.n_docs == 1500 and prepared.val.n_docs == 2 and prepared.val.n_sentences == 3
    assert prepared.tokenizer.decode(prepared.val.window(0, prepared.val.n_tokens)) == (
        "A held-out line. Another one. With two lines."
    )
    both = DataConfig(paths=["held.txt"], val_paths=["held.txt"])
    with pytest.raises(LmptError, match="in both data.paths and data.val_paths"):
        prepare_corpora(both, SMALL_TOK, tmp_path, tmp_path / "cache")


def test_few_documents_hold_out_sentences(tmp_path: Path) -> None:
    # 5 documents of 10 sentences: too few documents for 5%, so sentences 19 and 39 are held out
    docs = [" ".join(f"Doc {d} sentence {s} tells of the moon." for s in range(10)) for d in range(5)]
    (tmp_path / "few.txt").write_text("\n".join(docs) + "\n")
    data = DataConfig(paths=["few.txt"], documents="line", tokenize_workers=1)
    tok = TokenizerConfig(vocab_size=40, num_sentinels=4, byte_fallback=False, character_coverage=1.0)
    prepared = prepare_corpora(data, tok, tmp_path, tmp_path / "cache")
    assert prepared.val.n_docs == 2 and prepared.train.n_docs == 5 and prepared.train.n_sentences == 48
    held = [prepared.tokenizer.decode(prepared.val.window(*_span(prepared.val, d))) for d in range(2)]
    assert held == ["Doc 1 sentence 9 tells of the moon.", "Doc 3 sentence 9 tells of the moon."]


def _span(corpus: TokenCorpus, d: int) -> tuple[int, int]:
    start, end = corpus.doc_span(d)
    return start, end - start


def test_refusals(tmp_path: Path) -> None:
    (tmp_path / "blank.txt").write_text("\n \n\n")
    with pytest.raises(LmptError, match="training text is empty"):
        prepare_corpora(DataConfig(paths=["blank.txt"]), SMALL_TOK, tmp_path, tmp_path / "c")
    (tmp_path / "one.txt").write_text("Just one sentence here.\n")
    for fraction in (0.0, 1.0, -0.1):
        with pytest.raises(LmptError, match=f"data.val_fraction={fraction} must be between 0 and 1"):
            prepare_corpora(DataConfig(paths=["one.txt"], val_fraction=fraction), SMALL_TOK, tmp_path, tmp_path / "c")
    with pytest.raises(LmptError, match="too few sentences to hold out"):
        prepare_corpora(DataConfig(paths=["one.txt"]), SMALL_TOK, tmp_path, tmp_path / "c")


def test_default_cache_root_and_dtype(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LMPT_CACHE_DIR", str(tmp_path))
    assert default_cache_root(None) == tmp_path
    assert default_cache_root("~/x") == Path.home() / "x"
    monkeypatch.delenv("LMPT_CACHE_DIR")
    assert default_cache_root(None) == Path.home() / ".cache" / "lmpt"
    assert token_dtype(65535) == np.uint16 and token_dtype(65536) == np.uint32


@pytest.mark.parametrize("under", ["", "cache"])
def test_a_cache_dir_at_or_under_a_file_names_the_setting(tmp_path: Path, under: str) -> None:
    (tmp_path / "a-file").write_text("not a directory\n")
    chosen = str(tmp_path / "a-file" / under) if under else str(tmp_path / "a-file")
    with pytest.raises(LmptError, match=rf"^data.cache_dir={chosen}: {tmp_path / 'a-file'} is a file, not a directory"):
        default_cache_root(chosen)
    assert default_cache_root(str(tmp_path / "new" / "cache")) == tmp_path / "new" / "cache"  # made when used
