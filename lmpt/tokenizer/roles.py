"""How lmpt's reserved roles map onto a pretrained (hf) tokenizer: the one place that decides it.

Each role takes the first of its candidate tokens that the tokenizer has (in its vocabulary or among its
added tokens) and no earlier role took; bos may share eos's token (GPT-2 style). A role none of whose
candidates exists gets lmpt's own token, added as a special token after the vocabulary. Sentinels are the
tokenizer's own `<extra_id_i>` when it has `<extra_id_0>` (T5 style: all it has, in number order), else
`num_sentinels` are added. Its own <fim_prefix>, <fim_suffix>, <fim_middle> (all three) are fim's sentinels.
unk stays unmapped when the tokenizer has none (byte-level BPE never needs it).
The resolution reads only the tokenizer file, so it gives the same ids when it runs again on the file a run
directory stores (which holds the added tokens)."""

from __future__ import annotations

from tokenizers import AddedToken
from tokenizers import Tokenizer as FastTokenizer

from lmpt.tokenizer.special import BOS, CLS, EOS, MASK, MODE_TOKENS, PAD, SEP, UNK, SpecialTokens, sentinel_piece

# role -> candidates, most preferred first; the first candidate is what lmpt adds when none exists
ROLE_CANDIDATES: dict[str, tuple[str, ...]] = {
    "pad": (PAD, "[PAD]", "<|pad|>", "<|padding|>", "<|finetune_right_pad_id|>"),
    "eos": (EOS, "<|endoftext|>", "<|end_of_text|>", "<eos>", "<|eot_id|>"),
    "bos": (BOS, "<|begin_of_text|>", "<|startoftext|>", "<bos>", "<|endoftext|>"),
    "unk": (UNK, "[UNK]", "<|unk|>"),
    "mask": (MASK, "<mask>", "<|mask|>"),
    "cls": (CLS, "<cls>"),
    "sep": (SEP, "<sep>"),
    "nlu": (MODE_TOKENS[0],),
    "nlg": (MODE_TOKENS[1],),
    "s2s": (MODE_TOKENS[2],),
}
FIM_CANDIDATES = (
    ("<fim_prefix>", "<|fim_prefix|>"),
    ("<fim_suffix>", "<|fim_suffix|>"),
    ("<fim_middle>", "<|fim_middle|>"),
)
"""A pretrained tokenizer's own fill-in-the-middle tokens (StarCoder, Qwen2.5-Coder), used when it has all three."""
_MAY_SHARE = {"bos": "eos"}  # a tokenizer whose one boundary token serves as both (GPT-2's <|endoftext|>)
_OPTIONAL = {"unk"}  # never added


def _existing_sentinels(tok: FastTokenizer) -> list[int]:
    ids: list[int] = []
    while (i := tok.token_to_id(sentinel_piece(len(ids)))) is not None:
        ids.append(i)
    return ids


def _own_fim_tokens(tok: FastTokenizer) -> tuple[int, int, int] | None:
    found = [next((i for c in names if (i := tok.token_to_id(c)) is not None), None) for names in FIM_CANDIDATES]
    return (found[0], found[1], found[2]) if None not in found else None  # type: ignore[return-value]


def resolve_roles(tok: FastTokenizer, num_sentinels: int) -> SpecialTokens:
    """Map every role onto `tok` (adding the tokens it lacks, in place) and return their ids."""
    ids: dict[str, int | None] = {}
    missing: list[str] = []
    for role, candidates in ROLE_CANDIDATES.items():
        taken = {i for r, i in ids.items() if i is not None and _MAY_SHARE.get(role) != r}
        found = [i for c in candidates if (i := tok.token_to_id(c)) is not None and i not in taken]
        ids[role] = found[0] if found else None
        if not found and role not in _OPTIONAL:
            missing.append(role)
    sentinels = _existing_sentinels(tok)
    added = [ROLE_CANDIDATES[role][0] for role in missing]
    if not sentinels:
        added += [sentinel_piece(i) for i in range(num_sentinels)]
    if added:
        tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in added])
        for role in missing:
            ids[role] = tok.token_to_id(ROLE_CANDIDATES[role][0])
        sentinels = sentinels or _existing_sentinels(tok)
    fim = _own_fim_tokens(tok)
    taken = {i for i in ids.values() if i is not None} | set(sentinels) | set(fim or ())
    others = tuple(sorted(i for i, t in tok.get_added_tokens_decoder().items() if t.special and i not in taken))
    return SpecialTokens(
        num_sentinels=len(sentinels),
        sentinel_ids=tuple(sentinels),
        other_reserved=others,
        fim_ids=fim,
        **ids,  # type: ignore[arg-type]
    )
