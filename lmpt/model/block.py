"""The one transformer block every stack is built from: pre-norm self-attention, optional
cross-attention, gated MLP (SwiGLU, or T5's gated GELU)."""

from __future__ import annotations

import torch
from torch import nn

from lmpt.config.schema import ModelConfig
from lmpt.model.attention import Attention, Rope


def kv_heads(cfg: ModelConfig) -> int:
    """model.n_kv_heads, or n_heads when it is null (or absent: a config saved before grouped-query attention)."""
    value = getattr(cfg, "n_kv_heads", None)
    return int(cfg.n_heads) if value is None else int(value)


def flavour(cfg: ModelConfig) -> str:
    """model.flavour (llama for a config saved before flavours existed)."""
    return str(getattr(cfg, "flavour", None) or "llama")


class GatedMLP(nn.Module):
    """down(activation(gate(x)) * up(x)), no biases: SwiGLU with nn.SiLU (Llama's MLP), T5 v1.1's gated
    GELU (wi_0, wi_1, wo) with nn.GELU(approximate="tanh"). gate and up are one fused projection (`gate_up`,
    gate rows first): Llama's gate_proj/up_proj and T5's wi_0/wi_1 are `gate_up.weight.chunk(2)`."""

    def __init__(self, d_model: int, ffn_dim: int, activation: nn.Module) -> None:
        super().__init__()
        self.activation = activation
        self.gate_up = nn.Linear(d_model, 2 * ffn_dim, bias=False)
        self.down = nn.Linear(ffn_dim, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up(x).chunk(2, dim=-1)
        return self.down(self.activation(gate) * up)


class Block(nn.Module):
    """x + attn(norm(x)) [+ cross(norm(x), context)] + mlp(norm(x)), dropout on each residual branch.
    The t5 flavour: attention scores unscaled (T5 folds 1/sqrt(head_dim) into its initialisation), gated GELU."""

    def __init__(self, cfg: ModelConfig, cross: bool) -> None:
        super().__init__()
        d_model, n_heads, n_kv_heads, eps = int(cfg.d_model), int(cfg.n_heads), kv_heads(cfg), float(cfg.norm_eps)
        self.attn_norm = nn.RMSNorm(d_model, eps=eps)
        t5 = flavour(cfg) == "t5"
        scale = 1.0 if t5 else None
        self.attn = Attention(d_model, n_heads, n_kv_heads, scale=scale)
        self.cross_norm = nn.RMSNorm(d_model, eps=eps) if cross else None
        self.cross_attn = Attention(d_model, n_heads, n_kv_heads, cross=True, scale=scale) if cross else None
        self.mlp_norm = nn.RMSNorm(d_model, eps=eps)
        self.mlp = GatedMLP(d_model, int(cfg.ffn_dim), nn.GELU(approximate="tanh") if t5 else nn.SiLU())
        self.dropout = nn.Dropout(float(cfg.dropout))

    def forward(
        self,
        x: torch.Tensor,
        rope: Rope | None,
        mask: torch.Tensor | None,
        is_causal: bool,
        context: torch.Tensor | None = None,
        context_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """x [B, S, d] -> [B, S, d]; `context` [B, Sc, d] is required iff the block has cross-attention."""
        x = x + self.dropout(self.attn(self.attn_norm(x), rope=rope, mask=mask, is_causal=is_causal))
        if self.cross_attn is not None:
            assert self.cross_norm is not None and context is not None
            x = x + self.dropout(self.cross_attn(self.cross_norm(x), mask=context_mask, context=context))
        return x + self.dropout(self.mlp(self.mlp_norm(x)))
