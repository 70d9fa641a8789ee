"""The one transformer block every stack is built from: pre-norm self-attention, optional
cross-attention, SwiGLU MLP."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from lmpt.model.attention import Attention, Rope


class SwiGLU(nn.Module):
    """down(silu(gate(x)) * up(x)), no biases (Llama's MLP). gate and up are one fused projection
    (`gate_up`, gate rows first): Llama's gate_proj/up_proj are `gate_up.weight.chunk(2)`."""

    def __init__(self, d_model: int, ffn_dim: int) -> None:
        super().__init__()
        self.gate_up = nn.Linear(d_model, 2 * ffn_dim, bias=False)
        self.down = nn.Linear(ffn_dim, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up(x).chunk(2, dim=-1)
        return self.down(F.silu(gate) * up)


class Block(nn.Module):
    """x + attn(norm(x)) [+ cross(norm(x), context)] + mlp(norm(x)), dropout on each residual branch."""

    def __init__(self, d_model: int, n_heads: int, ffn_dim: int, dropout: float, norm_eps: float, cross: bool) -> None:
        super().__init__()
        self.attn_norm = nn.RMSNorm(d_model, eps=norm_eps)
        self.attn = Attention(d_model, n_heads)
        self.cross_norm = nn.RMSNorm(d_model, eps=norm_eps) if cross else None
        self.cross_attn = Attention(d_model, n_heads, cross=True) if cross else None
        self.mlp_norm = nn.RMSNorm(d_model, eps=norm_eps)
        self.mlp = SwiGLU(d_model, ffn_dim)
        self.dropout = nn.Dropout(dropout)

    def forward(
        self,
        x: torch.Tensor,
        rope: Rope,
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
