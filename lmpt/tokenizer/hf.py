"""The Hugging Face backend: any fast tokenizer file (tokenizer.json) read by the `tokenizers` library, with
lmpt's reserved roles mapped onto its own special tokens or added (lmpt.tokenizer.roles). lmpt's byte-level
BPE (bytelevel.py) is one of these too."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from tokenizers import Tokenizer as FastTokenizer

from lmpt.errors import LmptError
from lmpt.tokenizer.base import Tokenizer, remedy
from lmpt.tokenizer.roles import resolve_roles
from lmpt.tokenizer.sentencepiece import BYTE_PIECE

TOKENIZER_JSON = "tokenizer.json"
_WORD_MARKS = ("\u0120", "\u2581", "\u010a")  # byte-level space (Ġ), SentencePiece space (▁), byte-level newline (Ċ)


def tokenizer_json_path(directory: Path, what: str) -> Path:
    """`directory/tokenizer.json`, or a refusal naming the setting to fix."""
    path = directory / TOKENIZER_JSON
    if not path.is_file():
        raise LmptError(
            f"{directory} holds no {TOKENIZER_JSON}: {remedy(what, f'fix {what} (a tokenizer.json or its directory)')}"
        )
    return path


def parse_tokenizer_json(data: bytes, path: Path, what: str) -> FastTokenizer:
    """The `tokenizers` Tokenizer in `data`, or one line saying the file does not parse."""
    try:
        return FastTokenizer.from_str(data.decode("utf-8"))
    except Exception as e:  # the library raises a bare Exception with serde's message
        detail = (str(e).splitlines() or ["unreadable"])[0][:120]
        raise LmptError(
            f"{path} is not a tokenizer.json the tokenizers library can read ({detail}): {remedy(what)}"
        ) from None


def _require_encoding(tok: FastTokenizer, path: Path, what: str) -> None:
    """Refuse a tokenizer that parses but cannot turn text into ids: an empty vocabulary, or a model that fails
    on ordinary text (a word-level vocabulary without an unk token)."""
    if tok.get_vocab_size(with_added_tokens=False) == 0:
        raise LmptError(f"{path} has an empty vocabulary: it cannot encode text; {remedy(what)}")
    try:
        tok.encode("The quick brown fox, 1 2 3.", add_special_tokens=False)
    except Exception as e:  # the library raises a bare Exception naming what its model lacks
        detail = (str(e).splitlines() or ["no detail"])[0][:120]
        raise LmptError(f"{path} cannot encode text ({detail}): {remedy(what)}") from None


class HfTokenizer(Tokenizer):
    """A `tokenizers` fast tokenizer. Its bytes (and fingerprint) are the tokenizer.json with the added roles,
    which is what a run directory stores and what `lmpt-export` writes; loaded again (or unpickled) with
    num_sentinels=0 it resolves to the same ids and adds nothing."""

    suffix = ".json"

    def __init__(self, path: Path, model_bytes: bytes, num_sentinels: int = 0, what: str = "tokenizer.path") -> None:
        tok = parse_tokenizer_json(model_bytes, Path(path), what)
        _require_encoding(tok, Path(path), what)
        special = resolve_roles(tok, num_sentinels)
        super().__init__(path, tok.to_str().encode("utf-8"))
        self._tok = tok
        self.special = special
        added = tok.get_added_tokens_decoder()
        self.vocab_size = max(tok.get_vocab_size(with_added_tokens=True), max(added, default=-1) + 1)
        self._byte_level = "ByteLevel" in (tok.decoder.__class__.__name__ if tok.decoder else "")
        model = tok.model
        self._continuation = (
            getattr(model, "continuing_subword_prefix", None) if type(model).__name__ == "WordPiece" else None
        )

    def encode(self, text: str) -> list[int]:
        """Ids of `text`; no bos or eos is added (the file's post-processor is not applied)."""
        return self._tok.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: Sequence[str], threads: int = -1) -> list[list[int]]:
        """Ids of each text (no bos or eos); the library picks its threads (TOKENIZERS_PARALLELISM)."""
        return [e.ids for e in self._tok.encode_batch(list(texts), add_special_tokens=False)]

    def decode(self, ids: Iterable[int]) -> str:
        """Text of `ids`; pad ids are skipped, other reserved tokens appear as their text."""
        pad = self.special.pad
        return self._tok.decode([int(i) for i in ids if int(i) != pad], skip_special_tokens=False)

    def id_to_piece(self, i: int) -> str:
        """The token of id `i` ("" for an id the file leaves unused)."""
        return self._tok.id_to_token(int(i)) or ""

    def piece_to_id(self, piece: str) -> int:
        """The id of `piece` (unk's when the vocabulary lacks it and has an unk)."""
        found = self._tok.token_to_id(piece)
        if found is None:
            if self.special.unk is None:
                raise LmptError(f"the tokenizer {self.path} has no token {piece!r}")
            return self.special.unk
        return found

    def piece_byte_count(self, piece: str) -> int:
        """Byte-level: one byte per character of the token; WordPiece: the text after ##; SentencePiece style
        (Metaspace): a byte piece is one, U+2581 a space."""
        if self._byte_level:
            return len(piece)
        if self._continuation:
            return len(piece.removeprefix(self._continuation).encode("utf-8"))
        return 1 if BYTE_PIECE.fullmatch(piece) else len(piece.replace("\u2581", " ").encode("utf-8"))

    def piece_starts_word(self, piece: str) -> bool:
        """WordPiece: a piece without the continuation prefix (##); others: one starting with a space mark."""
        if self._continuation:
            return not piece.startswith(self._continuation)
        return piece.startswith(_WORD_MARKS)
