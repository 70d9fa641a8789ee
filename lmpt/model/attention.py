"""Rotary position embeddings (Hugging Face Llama convention) and multi-head attention through
`scaled_dot_product_attention`."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

Rope = tuple[torch.Tensor, torch.Tensor]
"""(cos, sin), each [S, head_dim] float32."""


def rotary_tables(seq_len: int, head_dim: int, theta: float, device: torch.device | str | None = None) -> Rope:
    """cos/sin tables for positions 0..seq_len-1, computed in float32 exactly as LlamaRotaryEmbedding does."""
    exponent = torch.arange(0, head_dim, 2, dtype=torch.int64, device=device).float() / head_dim
    inv_freq = 1.0 / (theta**exponent)
    positions = torch.arange(seq_len, device=device).float()
    freqs = torch.outer(positions, inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)  # non-interleaved halves, as in HF Llama
    return emb.cos(), emb.sin()


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(x1, x2) -> (-x2, x1) over the two halves of the last dimension."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary(x: torch.Tensor, rope: Rope) -> torch.Tensor:
    """Rotate x [B, H, S, hd] by position; tables are cast to x's dtype first, as HF does."""
    cos, sin = (t.to(x.dtype) for t in rope)
    return x * cos + rotate_half(x) * sin


class Attention(nn.Module):
    """Multi-head attention without biases. Self-attention rotates q and k; cross-attention
    (keys and values from `context`) uses no rotary embedding."""

    def __init__(self, d_model: int, n_heads: int) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.head_dim = d_model // n_heads
        # Separate projections map one-to-one onto q_proj/k_proj/v_proj/o_proj of an exported Llama.
        self.q = nn.Linear(d_model, d_model, bias=False)
        self.k = nn.Linear(d_model, d_model, bias=False)
        self.v = nn.Linear(d_model, d_model, bias=False)
        self.o = nn.Linear(d_model, d_model, bias=False)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        return x.view(b, s, self.n_heads, self.head_dim).transpose(1, 2)

    def forward(
        self,
        x: torch.Tensor,
        rope: Rope | None = None,
        mask: torch.Tensor | None = None,
        is_causal: bool = False,
        context: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """x [B, Sq, d] -> [B, Sq, d]. `mask` [B|1, 1, Sq, Sk] bool (True = may attend) or None;
        `is_causal` only with mask None (the fused causal kernel)."""
        source = x if context is None else context
        q, k, v = self._heads(self.q(x)), self._heads(self.k(source)), self._heads(self.v(source))
        if rope is not None:
            q, k = apply_rotary(q, rope), apply_rotary(k, rope)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal and mask is None)
        b, _, s, _ = out.shape
        return self.o(out.transpose(1, 2).reshape(b, s, -1))
