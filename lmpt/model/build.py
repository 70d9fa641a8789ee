"""Build a `LanguageModel` from the typed model config, after checking the sizes fit together."""

from __future__ import annotations

import torch

from lmpt.config.schema import ARCHITECTURES, FLAVOURS, ModelConfig
from lmpt.errors import LmptError
from lmpt.model.block import flavour, kv_heads
from lmpt.model.language_model import LanguageModel


def check_model_config(cfg: ModelConfig, arch: str, vocab_size: int) -> None:
    """Raise LmptError, naming the key, when the sizes cannot make a model."""
    if arch not in ARCHITECTURES:
        raise LmptError(f"model.arch={arch!r} is not one of {', '.join(ARCHITECTURES)}")
    for key in ("d_model", "n_layers", "n_heads", "ffn_dim", "max_seq_len"):
        if int(getattr(cfg, key)) <= 0:
            raise LmptError(f"model.{key}={getattr(cfg, key)} must be positive")
    if cfg.n_decoder_layers is not None and int(cfg.n_decoder_layers) <= 0:
        raise LmptError(f"model.n_decoder_layers={cfg.n_decoder_layers} must be positive or null")
    if cfg.d_model % cfg.n_heads != 0:
        raise LmptError(f"model.n_heads={cfg.n_heads} does not divide model.d_model={cfg.d_model}")
    n_kv_heads = getattr(cfg, "n_kv_heads", None)
    if n_kv_heads is not None and (int(n_kv_heads) <= 0 or cfg.n_heads % int(n_kv_heads) != 0):
        raise LmptError(
            f"model.n_kv_heads={n_kv_heads} must be positive and divide model.n_heads={cfg.n_heads} "
            "(each key/value head serves a whole group of query heads)"
        )
    if (cfg.d_model // cfg.n_heads) % 2 != 0:
        raise LmptError(
            f"model.d_model/model.n_heads={cfg.d_model // cfg.n_heads} must be even (rotary embeddings rotate pairs)"
        )
    style = flavour(cfg)
    if style not in FLAVOURS:
        raise LmptError(f"model.flavour={style!r} is not one of {', '.join(FLAVOURS)}")
    if style == "t5" and arch != "encoder-decoder":
        raise LmptError(
            f"model.flavour=t5 is the T5 v1.1 encoder-decoder; this objective trains a {arch}: use model.flavour=llama"
        )
    if style == "t5" and kv_heads(cfg) != int(cfg.n_heads):
        raise LmptError("model.flavour=t5 has no grouped-query attention (T5 has none): leave model.n_kv_heads null")
    if not 0.0 <= float(cfg.dropout) < 1.0:
        raise LmptError(f"model.dropout={cfg.dropout} must be in [0, 1)")
    if vocab_size <= 0:
        raise LmptError(f"vocabulary size {vocab_size} must be positive")


VOCAB_MULTIPLE = 64


def padded_vocab_size(tokenizer_vocab_size: int) -> int:
    """The model's vocabulary: the tokenizer's rounded up to a multiple of 64 (faster embedding and head
    matmuls); the rows above the tokenizer's are never a target and never sampled."""
    return -(-tokenizer_vocab_size // VOCAB_MULTIPLE) * VOCAB_MULTIPLE


def build_model(
    cfg: ModelConfig,
    arch: str,
    vocab_size: int,
    pad_id: int,
    n_segments: int = 0,
    n_sequence_classes: int = 0,
    mtp_depth: int = 0,
) -> LanguageModel:
    """A freshly initialised model; `arch` is the resolved architecture (cfg.arch is not read); `mtp_depth`
    multi-token prediction modules beside a decoder."""
    check_model_config(cfg, arch, vocab_size)
    return LanguageModel(cfg, arch, vocab_size, pad_id, n_segments, n_sequence_classes, mtp_depth)


def count_parameters(cfg: ModelConfig, arch: str, vocab_size: int, non_embedding: bool = False) -> int:
    """Parameter count without allocating: the model is built on the meta device."""
    with torch.device("meta"):
        return build_model(cfg, arch, vocab_size, pad_id=0).num_parameters(non_embedding)
