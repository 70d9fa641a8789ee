"""`lmpt-export RUN OUT_DIR`: a trained model as a Hugging Face directory (model.safetensors, config.json and
the tokenizer as tokenizer.json, converted from lmpt's SentencePiece model) that transformers' Auto classes load
offline. A decoder is exactly a `LlamaForCausalLM` with tied embeddings; an mlm encoder exactly a
`EuroBertForMaskedLM` (same layers, bidirectional); a t5-flavour encoder-decoder (span, ul2-mixture) exactly a
`T5ForConditionalGeneration`. nsp encoders (segment embeddings, pair head) and llama-flavour encoder-decoders
have no exact transformers counterpart and are refused before anything is written."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import torch

from lmpt.config.command_options import parse_command, run_command
from lmpt.errors import LmptError
from lmpt.hf.export_tokenizer import text_start_id, tokenizer_files, tokenizer_json
from lmpt.hf.names import llama_layout, t5_layout, to_hf
from lmpt.model.block import flavour, kv_heads
from lmpt.model.t5 import MAX_DISTANCE, NUM_BUCKETS
from lmpt.rundir.directory import TOKENIZER_FILE
from lmpt.rundir.trained import RUN_ARGUMENT, Trained, load_trained
from lmpt.safe_files import save_weights
from lmpt.tokenizer.hf import HfTokenizer

PROG = "lmpt-export"
SUMMARY = (
    "Write a trained decoder as a Hugging Face LlamaForCausalLM, an mlm encoder as a EuroBertForMaskedLM, or a "
    "model.flavour=t5 encoder-decoder (span, ul2-mixture) as a T5ForConditionalGeneration (model.safetensors, "
    "config.json, tokenizer.json), that the Auto classes and AutoTokenizer.from_pretrained(OUT_DIR) load offline. "
    "Needs transformers (for the tokenizer conversion)."
)
POSITIONALS = [
    RUN_ARGUMENT,
    ("OUT_DIR", "the directory to write (created; must be empty or absent unless overwrite=true)"),
]
HF_CLASSES = {
    "decoder": ("LlamaForCausalLM", "llama"),
    "encoder": ("EuroBertForMaskedLM", "eurobert"),
    "t5": ("T5ForConditionalGeneration", "t5"),
}
NO_COUNTERPART = {
    "encoder-decoder": (
        "no transformers architecture matches lmpt's encoder-decoder exactly (rotary positions in both stacks, "
        "RMSNorm, SwiGLU, one shared embedding): T5/UMT5 use relative position buckets and a gated-GELU MLP, "
        "T5Gemma Gemma's extra post-norms and scaled embeddings, BART learned positions, LayerNorm and biases. "
        "Train it with model.flavour=t5 to export a T5ForConditionalGeneration"
    ),
}


@dataclass
class ExportOptions:
    overwrite: bool = False
    """Replace the files of an OUT_DIR that already holds some."""
    dtype: str = "float32"
    """Weights dtype: float32, bfloat16 or float16."""
    add_bos_token: bool | None = None
    """Whether the tokenizer puts its bos before every text it encodes. Unset: true for a decoder, whose bos is
    `</s>` (where lmpt starts every text: generate() on tokenizer(prompt) continues as lmpt-generate, lm_eval's
    defaults score as lmpt-eval task=), false otherwise. false on a decoder: `</s>` declared as bos, not added;
    true on an encoder or encoder-decoder is refused."""


def export_kind(trained: Trained) -> str:
    """decoder, encoder, t5 (an encoder-decoder of the t5 flavour), encoder-decoder, or the objective's name when
    the objective refuses export (nsp: Objective.export_refusal)."""
    if trained.objective.export_refusal:
        return trained.objective_name
    if trained.arch == "encoder-decoder" and flavour(trained.config.model) == "t5":
        return "t5"
    return trained.arch


def t5_config(trained: Trained) -> dict:
    """config.json of the equivalent T5ForConditionalGeneration (T5 v1.1: gated-GELU, untied head)."""
    m, special = trained.config.model, trained.tokenizer.special
    return {
        "architectures": ["T5ForConditionalGeneration"],
        "model_type": "t5",
        "vocab_size": trained.model.vocab_size,
        "d_model": int(m.d_model),
        "d_kv": int(m.d_model) // int(m.n_heads),
        "d_ff": int(m.ffn_dim),
        "num_layers": int(m.n_layers),
        "num_decoder_layers": int(m.n_decoder_layers if m.n_decoder_layers is not None else m.n_layers),
        "num_heads": int(m.n_heads),
        "relative_attention_num_buckets": NUM_BUCKETS,
        "relative_attention_max_distance": MAX_DISTANCE,
        "dropout_rate": 0.0,
        "layer_norm_epsilon": float(m.norm_eps),
        "initializer_factor": 1.0,
        "feed_forward_proj": "gated-gelu",
        "is_encoder_decoder": True,
        "tie_word_embeddings": False,
        "use_cache": True,
        "pad_token_id": special.pad,
        "eos_token_id": special.eos,
        "decoder_start_token_id": special.bos,
        "torch_dtype": "float32",
    }


def hf_config(trained: Trained) -> dict:
    """config.json of the equivalent LlamaForCausalLM (decoder), EuroBertForMaskedLM (encoder) or
    T5ForConditionalGeneration (t5-flavour encoder-decoder)."""
    if export_kind(trained) == "t5":
        return t5_config(trained)
    m, special = trained.config.model, trained.tokenizer.special
    architecture, model_type = HF_CLASSES[trained.arch]
    extra = {"mask_token_id": special.mask} if trained.arch == "encoder" else {}
    return extra | {
        "architectures": [architecture],
        "model_type": model_type,
        "vocab_size": trained.model.vocab_size,
        "hidden_size": int(m.d_model),
        "intermediate_size": int(m.ffn_dim),
        "num_hidden_layers": int(m.n_layers),
        "num_attention_heads": int(m.n_heads),
        "num_key_value_heads": kv_heads(m),
        "head_dim": int(m.d_model) // int(m.n_heads),
        "hidden_act": "silu",
        "max_position_embeddings": int(m.max_seq_len),
        "rms_norm_eps": float(m.norm_eps),
        "rope_theta": float(m.rope_theta),
        "rope_scaling": None,
        "rope_parameters": {"rope_type": "default", "rope_theta": float(m.rope_theta)},
        "attention_bias": False,
        "attention_dropout": 0.0,
        "mlp_bias": False,
        "tie_word_embeddings": True,
        "initializer_range": float(m.init_std),
        "pretraining_tp": 1,
        "use_cache": True,
        "bos_token_id": text_start_id(trained.tokenizer, trained.arch),
        "eos_token_id": special.eos,
        "pad_token_id": special.pad,
        "torch_dtype": "float32",
    }


def hf_state_dict(trained: Trained, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """lmpt weights under Llama's (and EuroBERT's) names, whose tied lm_head is not stored, or T5's."""
    layout = t5_layout if export_kind(trained) == "t5" else llama_layout
    return to_hf(layout(trained.model), trained.model.state_dict(), dtype)


def generation_config(trained: Trained, config: dict) -> dict | None:
    """generation_config.json: a decoder starts from `</s>` and stops at it, never picking the rows that pad its
    vocabulary (as lmpt-generate); a t5 decoder starts from its decoder_start_token_id."""
    if trained.arch == "decoder":
        padding = list(range(trained.tokenizer.vocab_size, trained.model.vocab_size))
        keys = ("bos_token_id", "eos_token_id", "pad_token_id")
        return {k: config[k] for k in keys} | ({"suppress_tokens": padding} if padding else {})
    if export_kind(trained) == "t5":
        return {k: config[k] for k in ("decoder_start_token_id", "eos_token_id", "pad_token_id")}
    return None


def write_export(trained: Trained, out_dir: Path, dtype: torch.dtype, add_bos: bool) -> None:
    tok, arch = trained.tokenizer, trained.arch
    converted = tokenizer_json(tok, text_start_id(tok, arch) if add_bos else None)  # first: a missing dependency
    out_dir.mkdir(parents=True, exist_ok=True)  # writes nothing
    save_weights(out_dir / "model.safetensors", hf_state_dict(trained, dtype), metadata={"format": "pt"})
    (out_dir / "tokenizer.json").write_text(converted)
    config = hf_config(trained) | {"torch_dtype": str(dtype).removeprefix("torch.")}
    files = {"config.json": config, **tokenizer_files(tok, arch, int(trained.config.model.max_seq_len), add_bos)}
    generation = generation_config(trained, config)
    if generation is not None:
        files["generation_config.json"] = generation
    for name, content in files.items():
        (out_dir / name).write_text(json.dumps(content, indent=2) + "\n")
    if not isinstance(tok, HfTokenizer):
        shutil.copyfile(tok.path, out_dir / TOKENIZER_FILE)


_WRITABLE = "pick a directory you can write to"


def refuse_unwritable(out_dir: Path) -> None:
    """Refuse an OUT_DIR that is a file, lies under one, or whose nearest existing directory is read-only,
    before anything is read or created."""
    existing = next(p for p in (out_dir.absolute(), *out_dir.absolute().parents) if p.exists())
    if not existing.is_dir():
        reason = "it is a file" if existing == out_dir.absolute() else f"{existing} is a file"
    elif not os.access(existing, os.W_OK | os.X_OK):
        reason = f"{existing} is not writable"
    else:
        return
    raise LmptError(f"OUT_DIR {out_dir} cannot be written ({reason}): {_WRITABLE}")


def export(argv: list[str]) -> None:
    (run, out), o = parse_command(argv, PROG, SUMMARY, POSITIONALS, ExportOptions)
    dtypes = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
    if o.dtype not in dtypes:
        raise LmptError(f"dtype={o.dtype} is unknown: use {', '.join(dtypes)}")
    out_dir = Path(out).expanduser()
    refuse_unwritable(out_dir)
    if out_dir.exists() and (not out_dir.is_dir() or (any(out_dir.iterdir()) and not o.overwrite)):
        raise LmptError(f"{out_dir} exists and is not empty: pick a new OUT_DIR or pass overwrite=true")
    trained = load_trained(run)
    kind = export_kind(trained)
    refusal = trained.objective.export_refusal or NO_COUNTERPART.get(kind)
    if refusal:
        raise LmptError(
            f"cannot export {run} ({trained.objective_name} {trained.arch}) to transformers: {refusal}; "
            "nothing was written (decoders export as LlamaForCausalLM, mlm encoders as EuroBertForMaskedLM, "
            "t5-flavour encoder-decoders as T5ForConditionalGeneration)"
        )
    if o.add_bos_token and trained.arch != "decoder":
        raise LmptError(f"add_bos_token=true is for decoders; {run} is an {trained.arch}: drop it")
    add_bos = trained.arch == "decoder" if o.add_bos_token is None else o.add_bos_token
    try:
        import safetensors  # noqa: F401
        import transformers.convert_slow_tokenizer  # noqa: F401
    except ImportError as exc:
        raise LmptError(f'lmpt-export needs {exc.name}: pip install "lmpt[export]"') from None
    try:
        write_export(trained, out_dir, dtypes[o.dtype], add_bos)
    except OSError as exc:
        raise LmptError(f"OUT_DIR {out_dir} cannot be written ({exc.strerror or exc}): {_WRITABLE}") from None
    print(f"wrote a {HF_CLASSES[kind][0]} to {out_dir}")


def main() -> None:
    run_command(export)


if __name__ == "__main__":
    main()
