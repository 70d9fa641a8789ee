"""lmpt's reserved roles and the ids a tokenizer gives them (OBJECTIVES.md).

lmpt's own tokenizers (SentencePiece, byte-level BPE) put the roles first at fixed ids. A pretrained (hf)
tokenizer keeps its ids: each role maps onto the tokenizer's own special token where it has one, the rest
are added after its vocabulary (lmpt.tokenizer.roles). Either way every role has an id here, and the
objectives ask this record, never a range, which ids are reserved."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<s>", "</s>"
MASK, CLS, SEP = "[MASK]", "[CLS]", "[SEP]"
MODE_TOKENS = ("[NLU]", "[NLG]", "[S2S]")  # UL2 modes for R, X and S denoisers
_FIRST_SENTINEL = 10  # lmpt's own layout: the 10 roles above, then the sentinels


def sentinel_piece(i: int) -> str:
    """The i-th span sentinel, T5 style."""
    return f"<extra_id_{i}>"


@dataclass(frozen=True)
class SpecialTokens:
    """Ids of the reserved roles. lmpt's own layout (the defaults): pad 0, unk 1, bos 2, eos 3, mask 4, cls 5,
    sep 6, [NLU] 7, [NLG] 8, [S2S] 9, sentinels 10 .. 10+num_sentinels-1, ordinary pieces after. A pretrained
    tokenizer gives explicit `sentinel_ids` and lists its other special tokens in `other_reserved`."""

    num_sentinels: int = 100
    pad: int = 0
    unk: int | None = 1
    bos: int = 2
    eos: int = 3
    mask: int = 4
    cls: int = 5
    sep: int = 6
    nlu: int = 7
    nlg: int = 8
    s2s: int = 9
    sentinel_ids: tuple[int, ...] | None = None
    """Id of each sentinel in order; None: lmpt's layout (10, 11, ...)."""
    other_reserved: tuple[int, ...] = field(default=())
    """The tokenizer's own special tokens that no role took (never masked, predicted or drawn at random)."""
    fim_ids: tuple[int, int, int] | None = None
    """A pretrained tokenizer's own <fim_prefix>, <fim_suffix>, <fim_middle> (StarCoder style); None: the last
    three span sentinels serve."""

    def __post_init__(self) -> None:
        if self.sentinel_ids is not None and len(self.sentinel_ids) != self.num_sentinels:
            raise ValueError("num_sentinels must equal len(sentinel_ids)")

    @property
    def first_sentinel(self) -> int:
        """lmpt's own layout only (tests and trainers): the first sentinel's id."""
        if self.sentinel_ids is not None:
            raise ValueError("a pretrained tokenizer's sentinels are not a range: use sentinel_table()")
        return _FIRST_SENTINEL

    @property
    def first_ordinary(self) -> int:
        """lmpt's own layout only (tests and trainers): every id from here on is an ordinary piece."""
        return self.first_sentinel + self.num_sentinels

    def sentinel(self, i: int) -> int:
        """Id of `<extra_id_i>`; refuses an index the tokenizer does not have."""
        if not 0 <= i < self.num_sentinels:
            raise IndexError(f"sentinel {i} out of range: the tokenizer has {self.num_sentinels}")
        return self.sentinel_ids[i] if self.sentinel_ids is not None else _FIRST_SENTINEL + i

    def fim_sentinels(self) -> tuple[int, int, int] | None:
        """Ids of <fim_prefix>, <fim_suffix> and <fim_middle> (fill-in-the-middle): a pretrained tokenizer's own, else
        the last three span sentinels (<extra_id_{n-3}>, <extra_id_{n-2}>, <extra_id_{n-1}>), so lmpt's layout stays
        as it is; None with neither."""
        if self.fim_ids is not None:
            return self.fim_ids
        n = self.num_sentinels
        return (self.sentinel(n - 3), self.sentinel(n - 2), self.sentinel(n - 1)) if n >= 3 else None

    def sentinel_table(self) -> torch.Tensor:
        """[num_sentinels] long: the id of each sentinel, in order."""
        return torch.tensor([self.sentinel(i) for i in range(self.num_sentinels)], dtype=torch.long)

    def sentinel_number(self, token: int) -> int | None:
        """i when `token` is `<extra_id_i>`, else None."""
        if self.sentinel_ids is None:
            i = token - _FIRST_SENTINEL
            return i if 0 <= i < self.num_sentinels else None
        return self.sentinel_ids.index(token) if token in self.sentinel_ids else None

    def reserved_ids(self) -> tuple[int, ...]:
        """Every reserved id, sorted: the roles, the sentinels and the tokenizer's other special tokens."""
        roles = (self.pad, self.unk, self.bos, self.eos, self.mask, self.cls, self.sep, self.nlu, self.nlg, self.s2s)
        sentinels = (self.sentinel(i) for i in range(self.num_sentinels))
        fim = self.fim_ids or ()
        return tuple(sorted({i for i in (*roles, *sentinels, *fim, *self.other_reserved) if i is not None}))

    def reserved_mask(self, vocab_size: int) -> torch.Tensor:
        """[vocab_size] bool, True at reserved ids."""
        mask = torch.zeros(vocab_size, dtype=torch.bool)
        mask[list(self.reserved_ids())] = True
        return mask

    def ordinary_ids(self, vocab_size: int) -> torch.Tensor:
        """Ids of the ordinary pieces (what masking may select and random replacements come from)."""
        return (~self.reserved_mask(vocab_size)).nonzero().flatten()

    @staticmethod
    def user_defined_pieces(num_sentinels: int) -> list[str]:
        """The pieces lmpt's own layout reserves after pad/unk/bos/eos, in id order."""
        return [MASK, CLS, SEP, *MODE_TOKENS, *(sentinel_piece(i) for i in range(num_sentinels))]
