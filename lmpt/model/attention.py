"""Multi-head attention through `scaled_dot_product_attention`, its rotary position embeddings (Hugging Face Llama
convention) and its masks: boolean [B, 1, Sq, Sk] (True = may attend), built by small pure functions and combined by
AND; the attention layer broadcasts the head dimension."""

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
    """Multi-head attention without biases, grouped-query when `n_kv_heads` < `n_heads` (each key/value head
    serves n_heads / n_kv_heads consecutive query heads, as in Llama). Self-attention rotates q and k;
    cross-attention (keys and values from `context`) uses no rotary embedding.

    q, k and v come from one fused projection (`qkv`, or `q` and `kv` for cross-attention): one large
    matmul instead of three small ones. The rows are q, then k, then v, so an exported Llama's
    q_proj/k_proj/v_proj are the row blocks `split_projections` returns. `scale` is the factor on q.k
    (None = 1/sqrt(head_dim); T5 folds it into its initialisation and uses 1)."""

    def __init__(
        self, d_model: int, n_heads: int, n_kv_heads: int | None = None, cross: bool = False, scale: float | None = None
    ) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.n_kv_heads = n_kv_heads or n_heads
        self.head_dim = d_model // n_heads
        self.kv_dim = self.n_kv_heads * self.head_dim
        self.cross = cross
        self.scale = scale
        if cross:
            self.q = nn.Linear(d_model, d_model, bias=False)
            self.kv = nn.Linear(d_model, 2 * self.kv_dim, bias=False)
        else:
            self.qkv = nn.Linear(d_model, d_model + 2 * self.kv_dim, bias=False)
        self.o = nn.Linear(d_model, d_model, bias=False)

    def split_projections(self) -> dict[str, torch.Tensor]:
        """{"q", "k", "v", "o"} -> weight, the unfused layout (Llama's q_proj, k_proj, v_proj, o_proj):
        q and o [d, d], k and v [n_kv_heads * head_dim, d]."""
        if self.cross:
            k, v = self.kv.weight.split(self.kv_dim)
            q = self.q.weight
        else:
            q, k, v = self.qkv.weight.split([self.o.in_features, self.kv_dim, self.kv_dim])
        return {"q": q, "k": k, "v": v, "o": self.o.weight}

    def load_projections(self, weights: dict[str, torch.Tensor]) -> None:
        """Copy unfused {"q", "k", "v", "o"} weights (the layout `split_projections` returns) into place."""
        with torch.no_grad():
            if self.cross:
                self.q.weight.copy_(weights["q"])
                self.kv.weight.copy_(torch.cat([weights["k"], weights["v"]]))
            else:
                self.qkv.weight.copy_(torch.cat([weights["q"], weights["k"], weights["v"]]))
            self.o.weight.copy_(weights["o"])

    def _heads(self, x: torch.Tensor, n_heads: int) -> torch.Tensor:
        """[B, S, n_heads*hd] -> [B, n_heads, S, hd] (a view: no copy before the attention kernel)."""
        b, s, _ = x.shape
        return x.view(b, s, n_heads, self.head_dim).transpose(1, 2)

    def _project(self, x: torch.Tensor, context: torch.Tensor | None) -> tuple[torch.Tensor, ...]:
        """q [B, H, Sq, hd] and k, v [B, Hkv, Sk, hd]."""
        if self.cross:
            assert context is not None, "cross-attention needs a context"
            k, v = self.kv(context).split(self.kv_dim, dim=-1)
            q = self.q(x)
        else:
            q, k, v = self.qkv(x).split([self.o.in_features, self.kv_dim, self.kv_dim], dim=-1)
        return self._heads(q, self.n_heads), self._heads(k, self.n_kv_heads), self._heads(v, self.n_kv_heads)

    def _attend(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, is_causal: bool
    ) -> torch.Tensor:
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=is_causal, scale=self.scale, enable_gqa=self.n_kv_heads != self.n_heads
        )
        b, _, s, _ = out.shape
        return self.o(out.transpose(1, 2).reshape(b, s, -1))

    def forward(
        self,
        x: torch.Tensor,
        rope: Rope | None = None,
        mask: torch.Tensor | None = None,
        is_causal: bool = False,
        context: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """x [B, Sq, d] -> [B, Sq, d]. `mask` [B|1, 1|H, Sq, Sk] bool (True = may attend), float (added to the
        scores) or None; `is_causal` only with mask None (the fused causal kernel)."""
        q, k, v = self._project(x, context)
        if rope is not None:
            q, k = apply_rotary(q, rope), apply_rotary(k, rope)
        return self._attend(q, k, v, mask, is_causal and mask is None)

    def forward_cached(
        self,
        x: torch.Tensor,
        rope: Rope | None,
        past: tuple[torch.Tensor, torch.Tensor] | None,
        bias: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """Causal self-attention of new positions x [B, S, d] (rotated by `rope`, their own positions) over
        the cached keys/values `past` ([B, Hkv, P, hd] each, or None) and themselves: (output [B, S, d],
        keys/values [B, Hkv, P+S, hd] for the next call). `bias` [1, H, S, P+S]: a float position bias that
        already holds the causal mask (T5), instead of rotary positions. Inference only (KV-cache generation)."""
        q, k, v = self._project(x, None)
        if rope is not None:
            q, k = apply_rotary(q, rope), apply_rotary(k, rope)
        if past is not None:
            k, v = torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2)
        mask = bias
        if mask is None and past is not None and x.shape[1] > 1:
            # several new positions: each sees the past and the new ones up to itself
            mask = torch.ones(x.shape[1], k.shape[2], dtype=torch.bool, device=x.device).tril(k.shape[2] - x.shape[1])
        is_causal = mask is None and past is None and x.shape[1] > 1
        return self._attend(q, k, v, mask, is_causal), (k, v)


Mask = torch.Tensor


def causal_mask(seq_len: int, device: torch.device | str | None = None) -> Mask:
    """[1, 1, S, S]: position i sees j iff j <= i."""
    return torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).tril()[None, None]


def prefix_mask(prefix_len: torch.Tensor, seq_len: int) -> Mask:
    """[B, 1, S, S]: position i sees j iff j < prefix_len[b] or j <= i (bidirectional prefix, causal rest)."""
    pos = torch.arange(seq_len, device=prefix_len.device)
    in_prefix = pos[None, :] < prefix_len[:, None]  # [B, Sk]
    return (in_prefix[:, None, :] | (pos[None, :] <= pos[:, None])[None])[:, None]


def document_mask(document_ids: torch.Tensor) -> Mask:
    """[B, 1, S, S]: causal attention restricted to positions of the same document id."""
    same = document_ids[:, :, None] == document_ids[:, None, :]
    return (same & causal_mask(document_ids.shape[1], document_ids.device)[0])[:, None]


def key_padding_mask(key_ids: torch.Tensor, pad_id: int) -> Mask:
    """[B, 1, 1, Sk]: any query sees key j iff key j is not padding."""
    return (key_ids != pad_id)[:, None, None, :]


def combine_masks(*masks: Mask | None) -> Mask | None:
    """AND of the given masks (broadcasting); None entries are skipped, all None gives None."""
    present = [m for m in masks if m is not None]
    if not present:
        return None
    out = present[0]
    for m in present[1:]:
        out = out & m
    return out


def allow_self(mask: Mask) -> Mask:
    """Let every query see its own key, so a row that is all padding never softmaxes over nothing (NaN).

    Only rows of padded queries change: every real query already sees itself."""
    sq, sk = mask.shape[-2], mask.shape[-1]
    eye = torch.eye(sq, sk, dtype=torch.bool, device=mask.device)
    return mask | eye
