"""Pretrained Hugging Face tokenizers (issue 14, point 2): lmpt's reserved roles map onto the tokenizer's own
special tokens where it has them and are added where it does not; the file a run stores resolves to the
same ids again; the objectives never treat a reserved id as ordinary."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
import torch
from hf_files import gpt2_style, wordpiece

from lmpt.errors import LmptError
from lmpt.model.build import padded_vocab_size
from lmpt.objectives.mlm import mask_tokens
from lmpt.tokenizer.hf import HfTokenizer
from lmpt.tokenizer.load import load_tokenizer
from lmpt.tokenizer.special import MODE_TOKENS, sentinel_piece

TEXT = "First Citizen:\nBefore we proceed any further, hear me speak."


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hf")
    gpt2_style(root / "gpt2")
    wordpiece(root / "wordpiece")
    wordpiece(root / "t5ish", extra_special=tuple(sentinel_piece(i) for i in range(3)))
    return root


def test_gpt2_style_keeps_its_ids_and_gets_the_missing_roles_added(files: Path) -> None:
    original = load_tokenizer(files / "gpt2", num_sentinels=8)  # a directory holding tokenizer.json
    assert isinstance(original, HfTokenizer)
    s = original.special
    endoftext = original.piece_to_id("<|endoftext|>")
    assert endoftext == 699 and s.eos == endoftext and s.bos == endoftext  # its one boundary token serves both
    assert s.unk is None  # byte-level: nothing is unknown, nothing added for it
    added = ["<pad>", "[MASK]", "[CLS]", "[SEP]", *MODE_TOKENS, *(sentinel_piece(i) for i in range(8))]
    assert [original.id_to_piece(i) for i in range(700, original.vocab_size)] == added
    assert (s.pad, s.mask, s.sentinel(0), s.sentinel(7)) == (700, 701, 707, 714)
    assert original.vocab_size == 715 and padded_vocab_size(original.vocab_size) == 768
    ids = original.encode(TEXT)
    assert max(ids) < 699 and original.decode(ids) == TEXT  # text keeps the file's own ids
    spelled = sum(original.piece_byte_count(original.id_to_piece(i)) for i in original.encode(TEXT + " é😀"))
    assert spelled == len((TEXT + " é😀").encode("utf-8"))  # bits per byte counts each byte once


def test_the_stored_file_resolves_to_the_same_ids(files: Path, tmp_path: Path) -> None:
    first = load_tokenizer(files / "gpt2" / "tokenizer.json", num_sentinels=8)
    stored = tmp_path / "tokenizer.json"
    stored.write_bytes(first.model_bytes)  # what a run directory holds
    again = load_tokenizer(stored, num_sentinels=100)  # the run's file decides, not the setting
    assert again.special == first.special and again.fingerprint == first.fingerprint
    assert pickle.loads(pickle.dumps(first)).special == first.special
    no_sentinels = load_tokenizer(files / "wordpiece")  # as a run that asked for none stores it
    unpickled = pickle.loads(pickle.dumps(no_sentinels))  # as it reaches a worker
    assert unpickled.fingerprint == no_sentinels.fingerprint and unpickled.special.num_sentinels == 0


def test_wordpiece_roles_map_onto_its_own_specials(files: Path) -> None:
    tok = load_tokenizer(files / "wordpiece", num_sentinels=4)
    s = tok.special
    assert (s.pad, s.unk, s.cls, s.sep, s.mask) == (0, 1, 2, 3, 4)  # [PAD] [UNK] [CLS] [SEP] [MASK]
    assert tok.id_to_piece(s.bos) == "<s>" and tok.id_to_piece(s.eos) == "</s>" and s.bos >= 600
    assert tok.encode("hello") == tok.encode("HELLO")  # its normaliser is kept
    assert 2 not in tok.encode(TEXT) and 3 not in tok.encode(TEXT)  # no [CLS]/[SEP] around lmpt's text
    starts = tok.word_starts()
    pieces = [tok.id_to_piece(i) for i in range(tok.vocab_size)]
    continuation = [i for i, p in enumerate(pieces) if p.startswith("##")]
    assert continuation and not starts[continuation].any() and starts[5:600].sum() > 0


def test_a_tokenizers_own_sentinels_are_used(files: Path) -> None:
    tok = load_tokenizer(files / "t5ish", num_sentinels=100)
    assert tok.special.num_sentinels == 3 and tok.special.sentinel_ids == (5, 6, 7)
    assert tok.vocab_size == 600 + 2 + len(MODE_TOKENS)  # only bos, eos and the mode tokens were added


def test_masking_never_selects_or_draws_a_reserved_id(files: Path) -> None:
    tok = load_tokenizer(files / "wordpiece", num_sentinels=4)
    s = tok.special
    reserved = torch.tensor(s.reserved_ids())
    row = torch.tensor(tok.encode(TEXT * 4))
    tokens = torch.cat([reserved, row]).repeat(8, 1)
    gen = torch.Generator().manual_seed(0)
    inputs, labels = mask_tokens(
        tokens, gen, special=s, vocab_size=tok.vocab_size, mask_prob=0.5, mask_token_frac=0.0, random_token_frac=1.0
    )
    selected = labels != -100
    assert not selected[:, : len(reserved)].any(), "a reserved token was selected"
    assert selected.any() and not torch.isin(inputs[selected], reserved).any(), "a random draw was reserved"
    assert (inputs < tok.vocab_size).all()


def test_unreadable_files_are_refused_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "broken.json").write_text('{"model": {"type": "BPE"')
    with pytest.raises(LmptError, match=r"broken.json is not a tokenizer.json the tokenizers library can read"):
        load_tokenizer(tmp_path / "broken.json", "tokenizer.path")
    with pytest.raises(LmptError, match=r"holds no tokenizer.json: fix tokenizer.path"):
        load_tokenizer(tmp_path, "tokenizer.path")
    with pytest.raises(LmptError, match=r"tokenizer file not found: .*nope.json: fix tokenizer.path"):
        load_tokenizer(tmp_path / "nope.json", "tokenizer.path")


@pytest.mark.parametrize("model", ["WordLevel", "BPE", "WordPiece"])
def test_a_tokenizer_that_cannot_encode_is_refused_at_load_naming_the_file(tmp_path: Path, model: str) -> None:
    """It parses, but has an empty vocabulary and no unk: it would fail (or give nothing) on the first text."""
    from tokenizers import Tokenizer as FastTokenizer
    from tokenizers import models

    path = tmp_path / "empty.json"
    FastTokenizer(getattr(models, model)()).save(str(path))
    with pytest.raises(LmptError, match=rf"^{path} has an empty vocabulary: it cannot encode text; fix tokenizer.path"):
        load_tokenizer(path, "tokenizer.path")
