"""Decoder, encoder and encoder-decoder: token (and segment) embeddings, a stack of `Block`s and a
final RMSNorm. Each returns final hidden states; the head lives in `LanguageModel`."""

from __future__ import annotations

import math
from typing import cast

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from lmpt.config.schema import ModelConfig
from lmpt.model.attention import (
    Rope,
    allow_self,
    causal_mask,
    combine_masks,
    document_mask,
    key_padding_mask,
    prefix_mask,
    rotary_tables,
)
from lmpt.model.block import Block, flavour
from lmpt.model.t5 import RelativePositionBias, biased_mask


def padding_mask_if_any(ids: torch.Tensor, pad_id: int, padded: bool | None = None) -> torch.Tensor | None:
    """Key padding mask [B,1,1,S], or None when `ids` hold no padding (keeps the fast kernels). `padded`: whether
    they do, known on the host (Batch.input_padded); None = look, a device sync and a graph break under compile."""
    if padded is None:
        padded = bool((ids == pad_id).any())
    return key_padding_mask(ids, pad_id) if padded else None


def self_attention_mask(
    ids: torch.Tensor,
    attention: str,
    pad_id: int,
    prefix_len: torch.Tensor | None = None,
    document_ids: torch.Tensor | None = None,
    padded: bool | None = None,
) -> tuple[torch.Tensor | None, bool]:
    """(mask, is_causal) for self-attention over `ids` [B,S]. Plain causal attention with no padding or
    documents gives (None, True) for the fused causal path; bidirectional without padding (None, False).
    `padded`: as padding_mask_if_any."""
    seq_len = ids.shape[1]
    padding = padding_mask_if_any(ids, pad_id, padded)
    if attention == "causal":
        if document_ids is None and padding is None:
            return None, True
        base = causal_mask(seq_len, ids.device) if document_ids is None else document_mask(document_ids)
    elif attention == "prefix":
        if prefix_len is None:
            raise ValueError('attention="prefix" needs batch.prefix_len')
        base = prefix_mask(prefix_len, seq_len)
        if document_ids is not None:
            base = base & document_mask(document_ids)
    elif attention == "bidirectional":
        if padding is None:
            return None, False
        base = None
    else:
        raise ValueError(f"unknown attention {attention!r}")
    mask = combine_masks(base, padding)
    assert mask is not None
    return allow_self(mask.expand(ids.shape[0], 1, seq_len, seq_len)), False


class Embedding(nn.Module):
    """Token embedding (its weight is also the output head) plus an optional segment embedding."""

    def __init__(self, vocab_size: int, d_model: int, n_segments: int, dropout: float, init_std: float) -> None:
        super().__init__()
        self.tokens = nn.Embedding(vocab_size, d_model)
        self.segments = nn.Embedding(n_segments, d_model) if n_segments > 0 else None
        self.dropout = nn.Dropout(dropout)
        for table in (self.tokens, self.segments):
            if table is not None:
                nn.init.normal_(table.weight, mean=0.0, std=init_std)

    def forward(self, ids: torch.Tensor, segment_ids: torch.Tensor | None = None) -> torch.Tensor:
        x = self.tokens(ids)
        if self.segments is not None and segment_ids is not None:
            x = x + self.segments(segment_ids)
        return self.dropout(x)


class Stack(nn.Module):
    """n_layers blocks and a final RMSNorm. Positions: rotary tables made once for max_seq_len positions
    (non-persistent buffers: they follow .to(device) and stay out of checkpoints), or in the t5 flavour
    one relative position bias shared by every layer (bidirectional unless the stack has cross-attention,
    i.e. is the decoder of an encoder-decoder)."""

    rope_cos: torch.Tensor
    rope_sin: torch.Tensor

    def __init__(self, cfg: ModelConfig, n_layers: int, cross: bool) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block(cfg, cross) for _ in range(n_layers))
        self.norm = nn.RMSNorm(cfg.d_model, eps=cfg.norm_eps)
        self.activation_checkpointing = bool(getattr(cfg, "activation_checkpointing", False))
        self.relative_bias = RelativePositionBias(cfg.n_heads, not cross) if flavour(cfg) == "t5" else None
        cos, sin = rotary_tables(int(cfg.max_seq_len), cfg.d_model // cfg.n_heads, float(cfg.rope_theta))
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        init_stack(self, cfg.init_std, n_layers)

    @property
    def layers(self) -> list[Block]:
        """The blocks, first to last (typed: an nn.ModuleList yields plain modules)."""
        return cast(list[Block], list(self.blocks))

    def positions(
        self, length: int, mask: torch.Tensor | None, is_causal: bool
    ) -> tuple[Rope | None, torch.Tensor | None, bool]:
        """(rope, mask, is_causal) for `length` positions: rotary tables, or the t5 position bias folded into
        the mask (the bias holds the causal mask then)."""
        if self.relative_bias is None:
            return (self.rope_cos[:length], self.rope_sin[:length]), mask, is_causal
        return None, biased_mask(self.relative_bias(length, length), mask, is_causal), False

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None,
        is_causal: bool,
        context: torch.Tensor | None = None,
        context_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        rope, mask, is_causal = self.positions(x.shape[1], mask, is_causal)
        recompute = self.activation_checkpointing and self.training and torch.is_grad_enabled()
        for block in self.layers:
            if recompute:  # keep only each block's input; its activations are recomputed in backward
                x = checkpoint(block, x, rope, mask, is_causal, context, context_mask, use_reentrant=False)
            else:
                x = block(x, rope, mask, is_causal, context, context_mask)
        return self.norm(x)


def init_stack(stack: Stack, init_std: float, n_layers: int) -> None:
    """normal(0, init_std) on every Linear; attention and MLP output projections scaled by
    1/sqrt(2 n_layers) so the residual stream's variance does not grow with depth (GPT-2)."""
    for name, module in stack.named_modules():
        if isinstance(module, nn.Linear):
            scaled = name.endswith((".o", ".down"))
            std = init_std / math.sqrt(2 * n_layers) if scaled else init_std
            nn.init.normal_(module.weight, mean=0.0, std=std)
    if stack.relative_bias is not None:
        nn.init.normal_(stack.relative_bias.table.weight, mean=0.0, std=init_std)


class Decoder(nn.Module):
    """Decoder-only stack: causal or prefix self-attention, optionally within documents."""

    def __init__(self, cfg: ModelConfig, vocab_size: int, pad_id: int, n_segments: int = 0) -> None:
        super().__init__()
        self.pad_id = pad_id
        self.embed = Embedding(vocab_size, cfg.d_model, n_segments, cfg.dropout, cfg.init_std)
        self.stack = Stack(cfg, cfg.n_layers, cross=False)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention: str = "causal",
        prefix_len: torch.Tensor | None = None,
        document_ids: torch.Tensor | None = None,
        segment_ids: torch.Tensor | None = None,
        padded: bool | None = None,
    ) -> torch.Tensor:
        """[B,S] ids -> [B,S,d] final hidden states."""
        mask, is_causal = self_attention_mask(input_ids, attention, self.pad_id, prefix_len, document_ids, padded)
        return self.stack(self.embed(input_ids, segment_ids), mask, is_causal)


class Encoder(Decoder):
    """Bidirectional stack (BERT-like): every position sees every non-padding position."""

    def forward(
        self,
        input_ids: torch.Tensor,
        attention: str = "bidirectional",
        prefix_len: torch.Tensor | None = None,
        document_ids: torch.Tensor | None = None,
        segment_ids: torch.Tensor | None = None,
        padded: bool | None = None,
    ) -> torch.Tensor:
        """[B,S] ids -> [B,S,d]; `attention` is ignored: an encoder is always bidirectional."""
        mask, _ = self_attention_mask(input_ids, "bidirectional", self.pad_id, padded=padded)
        return self.stack(self.embed(input_ids, segment_ids), mask, False)


class EncoderDecoder(nn.Module):
    """T5-style: bidirectional encoder over `input_ids`, causal decoder with cross-attention over
    `decoder_input_ids`; one token embedding serves both and the head."""

    def __init__(self, cfg: ModelConfig, vocab_size: int, pad_id: int, n_segments: int = 0) -> None:
        super().__init__()
        self.pad_id = pad_id
        self.embed = Embedding(vocab_size, cfg.d_model, n_segments, cfg.dropout, cfg.init_std)
        self.encoder = Stack(cfg, cfg.n_layers, cross=False)
        n_decoder_layers = cfg.n_decoder_layers if cfg.n_decoder_layers is not None else cfg.n_layers
        self.decoder = Stack(cfg, n_decoder_layers, cross=True)

    def encode(
        self, input_ids: torch.Tensor, segment_ids: torch.Tensor | None = None, padded: bool | None = None
    ) -> torch.Tensor:
        """Encoder ids [B,S] -> the encoder's final hidden states [B,S,d] (what the decoder cross-attends to)."""
        enc_mask, _ = self_attention_mask(input_ids, "bidirectional", self.pad_id, padded=padded)
        return self.encoder(self.embed(input_ids, segment_ids), enc_mask, False)

    def forward(
        self,
        input_ids: torch.Tensor,
        decoder_input_ids: torch.Tensor,
        segment_ids: torch.Tensor | None = None,
        padded: bool | None = None,
        decoder_padded: bool | None = None,
    ) -> torch.Tensor:
        """Encoder ids [B,S] and decoder ids [B,T] -> decoder hidden states [B,T,d]; `padded`, `decoder_padded`:
        whether each holds padding, as padding_mask_if_any."""
        memory = self.encode(input_ids, segment_ids, padded)
        dec_mask, is_causal = self_attention_mask(decoder_input_ids, "causal", self.pad_id, padded=decoder_padded)
        cross_mask = padding_mask_if_any(input_ids, self.pad_id, padded)
        return self.decoder(self.embed(decoder_input_ids), dec_mask, is_causal, memory, cross_mask)
