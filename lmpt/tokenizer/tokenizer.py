"""The Tokenizer: a SentencePiece model whose first ids are lmpt's reserved tokens."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from pathlib import Path

import sentencepiece as spm
import torch

from lmpt.errors import LmptError
from lmpt.tokenizer.special import BOS, EOS, PAD, UNK, SpecialTokens, sentinel_piece

WORD_START = "\u2581"  # SentencePiece marks the start of a word with U+2581


def _check_reserved_layout(sp: spm.SentencePieceProcessor, path: Path) -> SpecialTokens:
    """The SpecialTokens of `sp`, or a refusal when its first ids are not lmpt's reserved pieces."""
    fixed = [PAD, UNK, BOS, EOS, *SpecialTokens.user_defined_pieces(0)]
    size = sp.get_piece_size()
    actual = [sp.id_to_piece(i) if i < size else None for i in range(len(fixed))]
    if actual != fixed:
        raise LmptError(
            f"tokenizer {path} was not trained with lmpt's reserved tokens (ids 0-{len(fixed) - 1} are "
            f"{actual[:4]}...): let lmpt train one (tokenizer.model_file=null)"
        )
    first = SpecialTokens(num_sentinels=0).first_sentinel
    n = 0
    while first + n < size and sp.id_to_piece(first + n) == sentinel_piece(n):
        n += 1
    if first + n >= size:
        raise LmptError(
            f"tokenizer {path} has no ordinary pieces after its reserved tokens: "
            "let lmpt train one (tokenizer.model_file=null)"
        )
    return SpecialTokens(num_sentinels=n)


class Tokenizer:
    """SentencePiece with lmpt's reserved layout (see SpecialTokens). Picklable: it travels to
    DataLoader workers as its model bytes."""

    def __init__(self, path: Path, model_bytes: bytes) -> None:
        self.path = Path(path)
        self._model_bytes = model_bytes
        self._sp = spm.SentencePieceProcessor(model_proto=model_bytes)
        self.special: SpecialTokens = _check_reserved_layout(self._sp, self.path)
        self.vocab_size: int = self._sp.get_piece_size()
        self.fingerprint: str = hashlib.sha256(model_bytes).hexdigest()
        self._word_starts: torch.Tensor | None = None

    @classmethod
    def load(cls, path: Path | str) -> Tokenizer:
        """Load a .model file and verify it carries lmpt's reserved tokens at their fixed ids."""
        path = Path(path).expanduser()
        if not path.is_file():
            raise LmptError(f"tokenizer model not found: {path}: fix tokenizer.model_file or set it to null")
        data = path.read_bytes()
        try:
            spm.SentencePieceProcessor(model_proto=data)
        except Exception:
            raise LmptError(
                f"{path} is not a SentencePiece model: fix tokenizer.model_file or set it to null"
            ) from None
        return cls(path, data)

    @property
    def model_bytes(self) -> bytes:
        """The serialized model: what `fingerprint` hashes and what a run directory stores."""
        return self._model_bytes

    def __getstate__(self) -> dict:
        return {"path": self.path, "model_bytes": self._model_bytes}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["path"], state["model_bytes"])

    def __repr__(self) -> str:
        return f"Tokenizer({self.path}, vocab_size={self.vocab_size}, sentinels={self.special.num_sentinels})"

    def encode(self, text: str) -> list[int]:
        """Ids of `text`; no bos or eos is added."""
        return self._sp.encode(text, out_type=int)

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """Ids of each text (no bos or eos)."""
        return self._sp.encode(list(texts), out_type=int)

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

    def word_starts(self) -> torch.Tensor:
        """[vocab_size] bool: True where a piece begins a word (starts with U+2581) and for every
        reserved id; whole-word masking groups each start with the continuation pieces after it."""
        if self._word_starts is None:
            pieces = (self._sp.id_to_piece(i) for i in range(self.vocab_size))
            starts = torch.tensor([p.startswith(WORD_START) for p in pieces], dtype=torch.bool)
            starts[: self.special.first_ordinary] = True
            self._word_starts = starts
        return self._word_starts.clone()
