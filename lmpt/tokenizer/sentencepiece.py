"""The SentencePiece backend: a model whose first ids are lmpt's reserved tokens (trained by lmpt.tokenizer.train
or given as tokenizer.model_file)."""

from __future__ import annotations

import io
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import sentencepiece as spm

from lmpt.config.schema import TokenizerConfig
from lmpt.errors import LmptError, SmallTextError
from lmpt.tokenizer.base import Tokenizer, remedy
from lmpt.tokenizer.special import BOS, EOS, PAD, UNK, SpecialTokens, sentinel_piece

WORD_START = "\u2581"  # SentencePiece marks the start of a word with U+2581
BYTE_PIECE = re.compile(r"<0x[0-9A-Fa-f]{2}>")  # byte fallback pieces
_TOO_LARGE = re.compile(r"value <= (\d+)")


def _check_reserved_layout(sp: spm.SentencePieceProcessor, path: Path, what: str) -> SpecialTokens:
    """The SpecialTokens of `sp`, or a refusal when its first ids are not lmpt's reserved pieces."""
    fixed = [PAD, UNK, BOS, EOS, *SpecialTokens.user_defined_pieces(0)]
    size = sp.get_piece_size()
    actual = [sp.id_to_piece(i) if i < size else None for i in range(len(fixed))]
    if actual != fixed:
        raise LmptError(
            f"tokenizer {path} was not trained with lmpt's reserved tokens (ids 0-{len(fixed) - 1} are "
            f"{actual[:4]}...): {remedy(what, 'let lmpt train one (tokenizer.model_file=null)')}"
        )
    first = SpecialTokens(num_sentinels=0).first_sentinel
    n = 0
    while first + n < size and sp.id_to_piece(first + n) == sentinel_piece(n):
        n += 1
    if first + n >= size:
        raise LmptError(
            f"tokenizer {path} has no ordinary pieces after its reserved tokens: "
            f"{remedy(what, 'let lmpt train one (tokenizer.model_file=null)')}"
        )
    return SpecialTokens(num_sentinels=n)


class SentencePieceTokenizer(Tokenizer):
    """SentencePiece with lmpt's reserved layout (see SpecialTokens)."""

    suffix = ".model"

    def __init__(self, path: Path, model_bytes: bytes, what: str = "tokenizer.model_file") -> None:
        super().__init__(path, model_bytes)
        try:
            self._sp = spm.SentencePieceProcessor(model_proto=model_bytes)
        except Exception:
            advice = remedy(what, f"fix {what} or set it to null")
            raise LmptError(f"{path} is not a SentencePiece model: {advice}") from None
        self.special = _check_reserved_layout(self._sp, self.path, what)
        self.vocab_size = self._sp.get_piece_size()

    def encode(self, text: str) -> list[int]:
        """Ids of `text`; no bos or eos is added."""
        return self._sp.encode(text, out_type=int)

    def encode_batch(self, texts: Sequence[str], threads: int = -1) -> list[list[int]]:
        """Ids of each text (no bos or eos), on `threads` threads (-1: all cores)."""
        return self._sp.encode(list(texts), out_type=int, num_threads=threads)

    def decode(self, ids: Iterable[int]) -> str:
        """Text of `ids`; pad ids are skipped, other reserved pieces appear as their text."""
        pad = self.special.pad
        return self._sp.decode([int(i) for i in ids if int(i) != pad])

    def id_to_piece(self, i: int) -> str:
        """The piece of id `i` (reserved ones included, e.g. `[MASK]`)."""
        return self._sp.id_to_piece(int(i))

    def piece_to_id(self, piece: str) -> int:
        """The id of `piece` (unk's id when the vocabulary lacks it)."""
        return self._sp.piece_to_id(piece)

    def piece_byte_count(self, piece: str) -> int:
        """UTF-8 bytes of the piece's text: a byte piece (<0x0A>) is one, the word-start mark a space."""
        return 1 if BYTE_PIECE.fullmatch(piece) else len(piece.replace(WORD_START, " ").encode("utf-8"))

    def piece_starts_word(self, piece: str) -> bool:
        """A SentencePiece piece begins a word when it starts with U+2581."""
        return piece.startswith(WORD_START)


def _trainer_error(cfg: TokenizerConfig, message: str) -> LmptError:
    """One line for SentencePiece's training failures."""
    if "Vocabulary size too high" in message:
        found = _TOO_LARGE.search(message)
        most = f" (at most ~{found.group(1)})" if found else ""
        return SmallTextError(
            f"tokenizer.vocab_size={cfg.vocab_size} is larger than this corpus supports{most}: "
            "lower tokenizer.vocab_size"
        )
    if "Increase vocab_size" in message:
        return LmptError(
            f"tokenizer.vocab_size={cfg.vocab_size} is too small for the characters of this corpus: "
            "raise it or lower tokenizer.character_coverage"
        )
    return LmptError(f"training the tokenizer failed: {message.splitlines()[-1]}")


def train_sentencepiece(cfg: TokenizerConfig, sentences: list[str]) -> bytes:
    """The serialized SentencePiece model (lmpt's reserved layout) trained on `sentences`. `cfg.lossless`
    keeps the text as written: no NFKC normalisation, no whitespace folding, bytes for unseen characters."""
    if cfg.model_type not in ("unigram", "bpe"):
        raise LmptError(f"tokenizer.model_type={cfg.model_type} is unknown: use unigram or bpe")
    if cfg.lossless and not cfg.byte_fallback:
        raise LmptError("tokenizer.lossless=true needs tokenizer.byte_fallback=true: set it or drop lossless")
    model = io.BytesIO()
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(sentences),
            model_writer=model,
            vocab_size=cfg.vocab_size,
            model_type=cfg.model_type,
            character_coverage=cfg.character_coverage,
            byte_fallback=cfg.byte_fallback,
            split_digits=cfg.split_digits,
            normalization_rule_name="identity" if cfg.lossless else "nmt_nfkc",
            remove_extra_whitespaces=not cfg.lossless,
            allow_whitespace_only_pieces=cfg.lossless,  # runs of spaces (code indentation) as pieces
            pad_id=0,
            unk_id=1,
            bos_id=2,
            eos_id=3,
            user_defined_symbols=SpecialTokens.user_defined_pieces(cfg.num_sentinels),
            input_sentence_size=0,  # sampled by the caller, with a seed (SentencePiece's own sample is not)
            shuffle_input_sentence=False,
            num_threads=cfg.threads,  # part of the settings: the trained model depends on the thread count
            minloglevel=2,
        )
    except RuntimeError as e:
        raise _trainer_error(cfg, str(e)) from None
    return model.getvalue()
