"""Fill in the middle with a decoder trained with objective=fim: the prompt is `<fim_prefix> prefix <fim_suffix>
suffix <fim_middle>` (the PSM order of training) and the model writes the middle until an end of document."""

from __future__ import annotations

from lmpt.errors import LmptError
from lmpt.inference.progress import WorkBar
from lmpt.model.generate import sample
from lmpt.objectives.fim import fim_sentinels
from lmpt.rng import generator
from lmpt.rundir.trained import Trained
from lmpt.tokenizer.base import Tokenizer


def middle_text(tok: Tokenizer, before: list[int], middle: list[int]) -> str:
    """The text of `middle` as it reads after the prefix's tokens `before`: decoded alone, a sentencepiece
    "▁word" would lose the space it starts with."""
    alone, head = tok.decode(middle), tok.decode(before)
    joined = tok.decode([*before, *middle])
    return joined[len(head) :] if before and joined.startswith(head) else alone


def infill(
    trained: Trained, prefix: str, suffix: str, max_tokens: int, temperature: float, seed: int, bar: WorkBar
) -> dict:
    """The middle a fim decoder writes between `prefix` and `suffix`, and the three put together."""
    if not trained.objective.fills_middle:
        raise LmptError(
            f"this decoder was trained with objective={trained.objective_name}, which never saw the fill-in-the-"
            "middle sentinels: train with objective=fim, or continue text with lmpt-generate"
        )
    tok = trained.tokenizer
    pre, suf, mid = fim_sentinels(tok.special)
    before = tok.encode(prefix)
    prompt = [tok.special.eos, pre, *before, suf, *tok.encode(suffix), mid]  # eos: a document starts
    if len(prompt) + max_tokens > trained.model.max_seq_len:
        raise LmptError(
            f"prefix and suffix take {len(prompt)} tokens and max_tokens={max_tokens} more; the model takes "
            f"{trained.model.max_seq_len}: shorten them or lower max_tokens"
        )
    middle = sample(
        trained.model,
        prompt,
        max_tokens,
        temperature,
        None,
        generator(seed, "infill"),
        eos_id=tok.special.eos,
        vocab_size=tok.vocab_size,
        on_token=bar.advance,
    )
    text = middle_text(tok, before, middle)
    return {"prefix": prefix, "suffix": suffix, "middle": text, "text": prefix + text + suffix, "tokens": len(middle)}
