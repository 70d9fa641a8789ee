"""Reserved tokens with fixed ids that never collide with ordinary pieces (OBJECTIVES.md)."""

from __future__ import annotations

from dataclasses import dataclass

PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<s>", "</s>"
MASK, CLS, SEP = "[MASK]", "[CLS]", "[SEP]"
MODE_TOKENS = ("[NLU]", "[NLG]", "[S2S]")  # UL2 modes for R, X and S denoisers


def sentinel_piece(i: int) -> str:
    """The i-th span sentinel, T5 style."""
    return f"<extra_id_{i}>"


@dataclass(frozen=True)
class SpecialTokens:
    """Ids of the reserved tokens. Layout: pad 0, unk 1, bos 2, eos 3, mask 4, cls 5, sep 6,
    [NLU] 7, [NLG] 8, [S2S] 9, sentinels 10 .. 10+num_sentinels-1, ordinary pieces after."""

    num_sentinels: int = 100
    pad: int = 0
    unk: int = 1
    bos: int = 2
    eos: int = 3
    mask: int = 4
    cls: int = 5
    sep: int = 6
    nlu: int = 7
    nlg: int = 8
    s2s: int = 9

    @property
    def first_sentinel(self) -> int:
        return 10

    def sentinel(self, i: int) -> int:
        """Id of `<extra_id_i>`; refuses an index the tokenizer does not have."""
        if not 0 <= i < self.num_sentinels:
            raise IndexError(f"sentinel {i} out of range: the tokenizer has {self.num_sentinels}")
        return self.first_sentinel + i

    @property
    def first_ordinary(self) -> int:
        """Every id from here to vocab_size - 1 is an ordinary piece (random replacements come from here)."""
        return self.first_sentinel + self.num_sentinels

    @staticmethod
    def user_defined_pieces(num_sentinels: int) -> list[str]:
        """The pieces sentencepiece must reserve after pad/unk/bos/eos, in id order."""
        return [MASK, CLS, SEP, *MODE_TOKENS, *(sentinel_piece(i) for i in range(num_sentinels))]
