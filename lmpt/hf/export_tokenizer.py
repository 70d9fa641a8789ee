"""The tokenizer files of an `lmpt-export` directory: tokenizer.json (lmpt's SentencePiece model converted, or an
hf/bytelevel run's own file) with tokenizer_config.json and special_tokens_map.json naming each role's token.

Where a text starts: lmpt packs training documents behind an eos, so a decoder reads every text after `</s>` and
never sees `<s>`: every training document, every generation prompt (lmpt-generate) and every scoring context,
empty or not (lmpt-eval task=, Objective.scoring_frame). An exported decoder therefore declares its bos to be that
eos token (id and piece), as GPT-2 declares <|endoftext|>, and by default (`add_bos_token`, unset) its tokenizer
puts it before every text it encodes. So out of the box `model.generate(**tokenizer(prompt))` continues a prompt as
lmpt-generate does, generate() without input starts from `</s>`, and lm-evaluation-harness with its default
arguments scores as lmpt-eval task= does: it encodes a context with the tokenizer's defaults (`</s>` + context) and
starts an empty one from the tokenizer's bos (`</s>`). `lmpt-export ... add_bos_token=false` declares `</s>` as bos
without adding it (lm_eval then reads a non-empty context without it, unlike lmpt-eval). Encoders and
encoder-decoders add nothing to text (lmpt trains them on text as it is; their bos is the tokenizer's own)."""

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


def tokenizer_files(tokenizer: Tokenizer, arch: str, max_len: int, add_bos: bool) -> dict[str, dict]:
    """tokenizer_config.json and special_tokens_map.json: the token of each role lmpt resolved, bos being where a
    text starts (`text_start_id`); with `add_bos` the tokenizer puts bos before every text (a decoder's default)."""
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
