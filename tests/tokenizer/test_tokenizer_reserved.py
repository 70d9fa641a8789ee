"""The trained tokenizer keeps lmpt's reserved tokens at fixed ids and round-trips real text."""

from __future__ import annotations

import pickle
import unicodedata

import torch

from lmpt.data.cache import PreparedData
from lmpt.data.sources import bundled_dir
from lmpt.tokenizer.special import MODE_TOKENS, SpecialTokens, sentinel_piece

EXPECTED_HEAD = ["<pad>", "<unk>", "<s>", "</s>", "[MASK]", "[CLS]", "[SEP]", *MODE_TOKENS]


def _sample_lines(path, every: int = 50) -> list[str]:
    lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return lines[::every]


def _normalized(text: str) -> str:
    """What SentencePiece's default normalisation (NFKC, collapsed spaces) makes of `text`."""
    return " ".join(unicodedata.normalize("NFKC", text).split())


def test_reserved_ids_are_at_their_fixed_places(shakespeare: PreparedData) -> None:
    tok = shakespeare.tokenizer
    assert tok.vocab_size == 1024
    assert [tok.id_to_piece(i) for i in range(10)] == EXPECTED_HEAD
    assert tok.special == SpecialTokens(num_sentinels=100)
    for i in (0, 1, 57, 99):
        assert tok.id_to_piece(tok.special.sentinel(i)) == sentinel_piece(i)
    assert tok.special.first_ordinary == 110
    assert not tok.id_to_piece(tok.special.first_ordinary).startswith("<extra_id")


def test_ordinary_text_never_produces_reserved_ids(shakespeare: PreparedData, wikitext: PreparedData) -> None:
    for prepared, name in ((shakespeare, "tinyshakespeare.txt"), (wikitext, "wikitext-2-valid.txt")):
        tok = prepared.tokenizer
        for ids in tok.encode_batch(_sample_lines(bundled_dir() / name)):
            assert ids and min(ids) >= tok.special.first_ordinary
        # the whole cached training stream: only eos among the reserved ids
        tokens = prepared.train.tokens
        reserved = tokens[tokens < tok.special.first_ordinary]
        assert set(reserved.tolist()) == {tok.special.eos}


def test_decode_encode_round_trips_real_lines(shakespeare: PreparedData, wikitext: PreparedData) -> None:
    for prepared, name in ((shakespeare, "tinyshakespeare.txt"), (wikitext, "wikitext-2-valid.txt")):
        tok = prepared.tokenizer
        lines = _sample_lines(bundled_dir() / name, every=20)
        assert len(lines) > 100
        for line in lines:
            assert tok.decode(tok.encode(line)) == _normalized(line)
    tok = shakespeare.tokenizer
    assert tok.decode(tok.encode("naïve café — ζ 🙂")) == "naïve café — ζ 🙂"  # byte fallback


def test_decode_skips_pad_and_encode_adds_nothing(shakespeare: PreparedData) -> None:
    tok = shakespeare.tokenizer
    ids = tok.encode("To be, or not to be")
    assert tok.special.bos not in ids and tok.special.eos not in ids
    assert tok.decode([tok.special.pad, *ids, tok.special.pad, tok.special.pad]) == "To be, or not to be"
    assert tok.encode_batch(["To be", "or not"]) == [tok.encode("To be"), tok.encode("or not")]


def test_word_starts_marks_word_initial_pieces_and_reserved_ids(shakespeare: PreparedData) -> None:
    tok = shakespeare.tokenizer
    starts = tok.word_starts()
    assert starts.dtype == torch.bool and starts.shape == (tok.vocab_size,)
    assert bool(starts[: tok.special.first_ordinary].all())
    for i in range(tok.special.first_ordinary, tok.vocab_size):
        assert bool(starts[i]) == tok.id_to_piece(i).startswith("\u2581")
    ids = tok.encode("whereupon thou shalt unmask thyself")
    assert bool(starts[ids[0]])  # the first piece of a text always begins a word
    assert 0 < int(starts[tok.special.first_ordinary :].sum()) < tok.vocab_size - tok.special.first_ordinary


def test_tokenizer_pickles_for_dataloader_workers(shakespeare: PreparedData) -> None:
    tok = shakespeare.tokenizer
    clone = pickle.loads(pickle.dumps(tok))
    assert clone.fingerprint == tok.fingerprint and clone.special == tok.special
    assert clone.encode("Good morrow") == tok.encode("Good morrow")
