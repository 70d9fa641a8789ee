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
    (keys and values from `context`) uses no rotary embedding.

    q, k and v come from one fused projection (`qkv`, or `q` and `kv` for cross-attention): one large
    matmul instead of three small ones. The rows are q, then k, then v, so an exported Llama's
    q_proj/k_proj/v_proj are `qkv.weight.chunk(3)` (`split_projections`)."""

    def __init__(self, d_model: int, n_heads: int, cross: bool = False) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.head_dim = d_model // n_heads
        self.cross = cross
        if cross:
            self.q = nn.Linear(d_model, d_model, bias=False)
            self.kv = nn.Linear(d_model, 2 * d_model, bias=False)
        else:
            self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.o = nn.Linear(d_model, d_model, bias=False)

    def split_projections(self) -> dict[str, torch.Tensor]:
        """{"q", "k", "v", "o"} -> [d, d] weight, the unfused layout (Llama's q_proj, k_proj, v_proj, o_proj)."""
        if self.cross:
            k, v = self.kv.weight.chunk(2)
            q = self.q.weight
        else:
            q, k, v = self.qkv.weight.chunk(3)
        return {"q": q, "k": k, "v": v, "o": self.o.weight}

    def _heads(self, x: torch.Tensor, n: int) -> tuple[torch.Tensor, ...]:
        """[B, S, n*d] -> n tensors [B, H, S, hd] (views: no copy before the attention kernel)."""
        b, s, _ = x.shape
        return x.view(b, s, n, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4).unbind(0)

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
        if self.cross:
            assert context is not None, "cross-attention needs a context"
            (q,) = self._heads(self.q(x), 1)
            k, v = self._heads(self.kv(context), 2)
        else:
            q, k, v = self._heads(self.qkv(x), 3)
        if rope is not None:
            q, k = apply_rotary(q, rope), apply_rotary(k, rope)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal and mask is None)
        b, _, s, _ = out.shape
        return self.o(out.transpose(1, 2).reshape(b, s, -1))

    def forward_cached(
        self, x: torch.Tensor, rope: Rope, past: tuple[torch.Tensor, torch.Tensor] | None
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """Causal self-attention of new positions x [B, S, d] (rotated by `rope`, their own positions) over
        the cached keys/values `past` ([B, H, P, hd] each, or None) and themselves: (output [B, S, d],
        keys/values [B, H, P+S, hd] for the next call). Inference only (KV-cache generation)."""
        q, k, v = self._heads(self.qkv(x), 3)
        q, k = apply_rotary(q, rope), apply_rotary(k, rope)
        mask = None
        if past is not None:
            k, v = torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2)
            if x.shape[1] > 1:  # several new positions: each sees the past and the new ones up to itself
                mask = torch.ones(x.shape[1], k.shape[2], dtype=torch.bool, device=x.device).tril(
                    k.shape[2] - x.shape[1]
                )
        is_causal = past is None and x.shape[1] > 1
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal)
        b, _, s, _ = out.shape
        return self.o(out.transpose(1, 2).reshape(b, s, -1)), (k, v)
