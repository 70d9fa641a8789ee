"""Training a tokenizer once per (corpus, settings), reusing it, and loading or refusing user models."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest
import sentencepiece as spm

from lmpt.config.schema import DataConfig, TokenizerConfig
from lmpt.data.cache import default_cache_root, prepare_corpora
from lmpt.data.sources import bundled_dir, iter_documents
from lmpt.errors import LmptError
from lmpt.tokenizer.load import load_tokenizer
from lmpt.tokenizer.train import MODEL_NAME, _commit, prepare_tokenizer

SMALL = TokenizerConfig(vocab_size=600, num_sentinels=8)


class CountingDocuments:
    """The first few hundred Shakespeare turns; counts how often training read them."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> Iterator[list[str]]:
        self.calls += 1
        docs = iter_documents([bundled_dir() / "tinyshakespeare.txt"], "blank_line", "text")
        return (doc for i, doc in enumerate(docs) if i < 1500)


def test_trained_once_then_reused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    docs = CountingDocuments()
    first = prepare_tokenizer(SMALL, docs, "corpus-a", tmp_path)
    assert docs.calls == 1 and first.vocab_size == 600 and first.special.num_sentinels == 8
    model = first.path
    assert model.name == MODEL_NAME and model.parent.parent == tmp_path / "tokenizers"
    mtime = model.stat().st_mtime_ns
    capsys.readouterr()

    second = prepare_tokenizer(SMALL, docs, "corpus-a", tmp_path)
    assert docs.calls == 1, "the second call must not read the corpus again"
    assert "reusing tokenizer" in capsys.readouterr().out
    assert second.path == model and model.stat().st_mtime_ns == mtime
    assert second.fingerprint == first.fingerprint
    assert not [p for p in (tmp_path / "tokenizers").iterdir() if p.name.startswith(".tmp")]


def test_other_corpus_or_settings_train_another(tmp_path: Path) -> None:
    base = prepare_tokenizer(SMALL, CountingDocuments(), "corpus-a", tmp_path)
    other_corpus = prepare_tokenizer(SMALL, CountingDocuments(), "corpus-b", tmp_path)
    bpe = TokenizerConfig(vocab_size=600, num_sentinels=8, model_type="bpe")
    other_settings = prepare_tokenizer(bpe, CountingDocuments(), "corpus-a", tmp_path)
    assert len({base.path, other_corpus.path, other_settings.path}) == 3
    assert other_settings.fingerprint != base.fingerprint


def test_user_model_file_is_loaded(tmp_path: Path) -> None:
    trained = prepare_tokenizer(SMALL, CountingDocuments(), "corpus-a", tmp_path / "a")
    user = TokenizerConfig(model_file=str(trained.path), vocab_size=123)  # the file decides the size
    docs = CountingDocuments()
    loaded = prepare_tokenizer(user, docs, "anything", tmp_path / "b")
    assert docs.calls == 0 and loaded.fingerprint == trained.fingerprint and loaded.vocab_size == 600
    assert not (tmp_path / "b").exists()


def test_user_model_without_reserved_tokens_is_refused(tmp_path: Path) -> None:
    plain = io.BytesIO()
    lines = [line for line in (bundled_dir() / "tinyshakespeare.txt").read_text().splitlines()[:3000] if line]
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=plain, vocab_size=300, minloglevel=2)
    path = tmp_path / "plain.model"
    path.write_bytes(plain.getvalue())
    with pytest.raises(LmptError, match="not trained with lmpt's reserved tokens.*model_file=null"):
        prepare_tokenizer(TokenizerConfig(model_file=str(path)), CountingDocuments(), "x", tmp_path)
    garbage = tmp_path / "garbage.model"
    garbage.write_bytes(b"not a model at all")
    with pytest.raises(LmptError, match="not a SentencePiece model"):
        load_tokenizer(garbage)
    with pytest.raises(LmptError, match="tokenizer file not found"):
        prepare_tokenizer(TokenizerConfig(model_file=str(tmp_path / "nope.model")), CountingDocuments(), "x", tmp_path)


def test_vocab_larger_than_corpus_is_refused_with_the_limit(tmp_path: Path) -> None:
    cfg = TokenizerConfig(vocab_size=60000, num_sentinels=8)
    with pytest.raises(LmptError, match=r"vocab_size=60000 is larger than this corpus supports \(at most ~\d+\)"):
        prepare_tokenizer(cfg, CountingDocuments(), "corpus-a", tmp_path)
    with pytest.raises(LmptError, match="leaves no room"):
        prepare_tokenizer(TokenizerConfig(vocab_size=100), CountingDocuments(), "corpus-a", tmp_path)


def test_losing_the_commit_race_keeps_the_winner(tmp_path: Path) -> None:
    final, loser = tmp_path / "key", tmp_path / ".tmp-key"
    final.mkdir()
    (final / MODEL_NAME).write_bytes(b"winner")
    loser.mkdir()
    (loser / MODEL_NAME).write_bytes(b"loser")
    _commit(loser, final, MODEL_NAME)
    assert (final / MODEL_NAME).read_bytes() == b"winner" and not loser.exists()


def test_held_out_text_is_not_used_to_train_the_tokenizer(tmp_path: Path) -> None:
    # 40 documents; with val_fraction 0.05 documents 19 and 39 are held out, and only they contain ζ
    docs = []
    for i in range(40):
        extra = " ζζζ ζζ ζ" if i in (19, 39) else ""
        docs.append(f"Document {i} speaks of kings and queens{extra}.\nAnd of the sea and land {i}.\n")
    (tmp_path / "corpus.txt").write_text("\n".join(docs), encoding="utf-8")
    data = DataConfig(paths=["corpus.txt"], documents="blank_line", tokenize_workers=1)
    prepared = prepare_corpora(
        data,
        TokenizerConfig(vocab_size=80, num_sentinels=4, byte_fallback=False, character_coverage=1.0),
        tmp_path,
        tmp_path / "c",
    )
    tok = prepared.tokenizer
    assert prepared.val.n_docs == 2 and prepared.train.n_docs == 38
    assert not any("ζ" in tok.id_to_piece(i) for i in range(tok.vocab_size))
    assert default_cache_root(None) != tmp_path / "c"  # the explicit cache root was used, not the default
