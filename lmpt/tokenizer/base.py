"""The tokenizer interface every backend implements (sentencepiece.py, hf.py; lmpt.tokenizer.load picks the backend
for a file), and what the refusal of a tokenizer file tells the user to do: fix the setting that named the file, or,
for the copy a run directory holds, know that the run directory is damaged (no setting of the command can fix
that)."""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from pathlib import Path

import torch

from lmpt.tokenizer.special import SpecialTokens


class Tokenizer(ABC):
    """Text <-> ids, with every reserved role at a known id (`special`). A tokenizer is its serialized bytes:
    `fingerprint` hashes them (token caches are keyed by it), a run directory stores them, and the object
    pickles as them (it travels to DataLoader and tokenising workers)."""

    suffix: str = ""
    """File suffix of the serialized form (.model, .json): a run directory stores it as tokenizer<suffix>."""

    special: SpecialTokens
    vocab_size: int

    def __init__(self, path: Path, model_bytes: bytes) -> None:
        self.path = Path(path)
        self._model_bytes = model_bytes
        self.fingerprint: str = hashlib.sha256(model_bytes).hexdigest()
        self._word_starts: torch.Tensor | None = None

    @property
    def model_bytes(self) -> bytes:
        """The serialized tokenizer: what `fingerprint` hashes and what a run directory stores."""
        return self._model_bytes

    def __getstate__(self) -> dict:
        return {"path": self.path, "model_bytes": self._model_bytes}

    def __setstate__(self, state: dict) -> None:
        type(self).__init__(self, state["path"], state["model_bytes"])

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.path}, vocab_size={self.vocab_size}, sentinels={self.special.num_sentinels})"
        )

    @abstractmethod
    def encode(self, text: str) -> list[int]:
        """Ids of `text`; no bos or eos is added."""

    @abstractmethod
    def encode_batch(self, texts: Sequence[str], threads: int = -1) -> list[list[int]]:
        """Ids of each text (no bos or eos); `threads` where the backend takes a thread count (-1: all)."""

    @abstractmethod
    def decode(self, ids: Iterable[int]) -> str:
        """Text of `ids`; pad ids are skipped, other reserved tokens appear as their text."""

    @abstractmethod
    def id_to_piece(self, i: int) -> str:
        """The piece of id `i` (reserved ones included, e.g. `[MASK]`)."""

    @abstractmethod
    def piece_to_id(self, piece: str) -> int:
        """The id of `piece`."""

    @abstractmethod
    def piece_byte_count(self, piece: str) -> int:
        """UTF-8 bytes of text an ordinary piece spells (bits per byte counts them)."""

    def piece_bytes(self) -> torch.Tensor:
        """[V] UTF-8 bytes each piece spells (the backend's `piece_byte_count`); reserved tokens (eos, sentinels,
        ...) count none."""
        reserved = set(self.special.reserved_ids())
        pieces = (self.id_to_piece(i) for i in range(self.vocab_size))
        sizes = [0 if i in reserved else self.piece_byte_count(piece) for i, piece in enumerate(pieces)]
        return torch.tensor(sizes, dtype=torch.long)

    @abstractmethod
    def piece_starts_word(self, piece: str) -> bool:
        """Whether an ordinary piece begins a word (rather than continuing the one before it)."""

    def word_starts(self) -> torch.Tensor:
        """[vocab_size] bool: True where a piece begins a word and for every reserved id; whole-word masking
        groups each start with the continuation pieces after it."""
        if self._word_starts is None:
            pieces = (self.id_to_piece(i) for i in range(self.vocab_size))
            starts = torch.tensor([self.piece_starts_word(p) for p in pieces], dtype=torch.bool)
            starts[list(self.special.reserved_ids())] = True
            self._word_starts = starts
        return self._word_starts.clone()


RUN_FILE = "the run directory"
"""`what` for the tokenizer file a run directory holds (lmpt-eval, -generate, -fill, -export, resume)."""


def remedy(what: str, setting_advice: str | None = None) -> str:
    """The clause ending the refusal of a tokenizer file: `setting_advice` (default `fix {what}`) when `what` is the
    setting that named the file; for a run's own file, that the run directory is damaged."""
    if what == RUN_FILE:
        return (
            "the run directory is damaged (its tokenizer file is not the one it was trained with): "
            "restore the file from a copy of the run, or train the run again"
        )
    return setting_advice or f"fix {what}"
