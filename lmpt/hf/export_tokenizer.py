"""The tokenizer files of an `lmpt-export` directory: tokenizer.json (lmpt's SentencePiece model converted, or an
hf/bytelevel run's own file) with tokenizer_config.json and special_tokens_map.json naming each role's token.

Where a text starts: lmpt packs training documents behind an eos, so a decoder reads every document, every
generation prompt (lmpt-generate) and every empty scoring context (lmpt-eval task=) after `</s>`, and never sees
`<s>`. An exported decoder therefore declares its bos to be that eos token (id and piece), as GPT-2 declares
<|endoftext|>: lm-evaluation-harness then starts an empty context from it by default (its prefix_token_id is the
tokenizer's bos), and transformers' `generate()` without input starts from it. The tokenizer adds no token to text
(lmpt-eval reads a non-empty context as it is, and so does lm_eval's default); `add_bos_token=true` at export, or
`AutoTokenizer.from_pretrained(DIR, add_bos_token=True)` on a plain export, prepends `</s>` to every text, as
lmpt-generate does to its prompt."""

from __future__ import annotations

import json
from pathlib import Path

from lmpt.tokenizer.base import Tokenizer
from lmpt.tokenizer.hf import HfTokenizer


def text_start_id(tokenizer: Tokenizer, arch: str) -> int | None:
    """The id a text starts after, declared as bos: eos for decoders (module docstring), the tokenizer's bos
    otherwise (a t5 decoder starts from it; an encoder does not use it)."""
    return tokenizer.special.eos if arch == "decoder" else tokenizer.special.bos


def tokenizer_json(tokenizer: Tokenizer, prefix_id: int | None = None) -> str:
    """tokenizer.json that encodes text to the ids lmpt used: an hf or bytelevel run's own file (roles added,
    post-processor dropped: lmpt adds no [CLS]/bos/eos to text), or lmpt's SentencePiece model converted. With
    `prefix_id`, a post-processor that puts that token before every text (add_special_tokens, the default)."""
    if isinstance(tokenizer, HfTokenizer):
        content = json.loads(tokenizer.model_bytes)
        content["post_processor"] = None
        converted = json.dumps(content, ensure_ascii=False)
    else:
        converted = sentencepiece_tokenizer_json(tokenizer.path)
    if prefix_id is None:
        return converted
    from tokenizers import Tokenizer as FastTokenizer
    from tokenizers import processors

    fast = FastTokenizer.from_str(converted)
    piece = tokenizer.id_to_piece(prefix_id)
    fast.post_processor = processors.TemplateProcessing(
        single=f"{piece} $A", pair=f"{piece} $A {piece}:1 $B:1", special_tokens=[(piece, prefix_id)]
    )
    return fast.to_str()


def sentencepiece_tokenizer_json(model_file: Path) -> str:
    """tokenizer.json of lmpt's SentencePiece model: its normaliser, unigram pieces and byte fallback, converted
    by transformers' generic SentencePiece converter (the Llama one assumes BPE and skips the normaliser)."""
    import types

    from tokenizers import decoders
    from transformers.convert_slow_tokenizer import SpmConverter

    class LmptConverter(SpmConverter):
        handle_byte_fallback = True

        def decoder(self, replacement, add_prefix_space):  # byte pieces back to bytes, then the leading space off
            return decoders.Sequence(
                [decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)]
            )

    return LmptConverter(types.SimpleNamespace(vocab_file=str(model_file))).converted().to_str()


def tokenizer_files(tokenizer: Tokenizer, arch: str, max_len: int, add_bos: bool = False) -> dict[str, dict]:
    """tokenizer_config.json and special_tokens_map.json: the token of each role lmpt resolved, bos being where a
    text starts (`text_start_id`). No token is added to text unless `add_bos` (then bos before every text)."""
    ids = tokenizer.special
    roles = {"bos": text_start_id(tokenizer, arch), "eos": ids.eos, "unk": ids.unk, "pad": ids.pad}
    roles |= {"mask": ids.mask, "cls": ids.cls, "sep": ids.sep}
    special = {f"{role}_token": tokenizer.id_to_piece(i) for role, i in roles.items() if i is not None}
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        **special,
        "add_bos_token": add_bos,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": max_len,
    }
    return {"tokenizer_config.json": config, "special_tokens_map.json": special}
