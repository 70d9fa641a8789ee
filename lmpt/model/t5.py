"""The T5 v1.1 flavour of lmpt's encoder-decoder (`model.flavour=t5`): relative position buckets instead
of rotary embeddings, a gated-GELU feed-forward, unscaled attention and an untied output head, so that a
trained model is exactly a transformers `T5ForConditionalGeneration`."""

from __future__ import annotations

import math

import torch
from torch import nn

NUM_BUCKETS = 32
"""Relative position buckets per direction set (T5 v1.1)."""
MAX_DISTANCE = 128
"""Distances from here on share the last bucket (T5 v1.1)."""


def relative_position_bucket(relative: torch.Tensor, bidirectional: bool, num_buckets: int, max_distance: int):
    """Bucket of each key-minus-query distance: exact for the nearest half of a direction's buckets, then
    logarithmically wider up to `max_distance`. Bidirectional splits the buckets between keys before and
    after the query; a causal stack sees only earlier keys (later ones fall into bucket 0 and are masked)."""
    bucket = torch.zeros_like(relative)
    if bidirectional:
        num_buckets //= 2
        bucket = bucket + (relative > 0).long() * num_buckets
        distance = relative.abs()
    else:
        distance = (-relative).clamp(min=0)
    exact = num_buckets // 2
    log_ratio = torch.log(distance.float().clamp(min=1) / exact) / math.log(max_distance / exact)
    wide = (exact + (log_ratio * (num_buckets - exact)).long()).clamp(max=num_buckets - 1)
    return bucket + torch.where(distance < exact, distance, wide)


class RelativePositionBias(nn.Module):
    """A learned scalar per (bucket, head), added to the attention scores of every layer of one stack."""

    def __init__(self, n_heads: int, bidirectional: bool) -> None:
        super().__init__()
        self.bidirectional = bidirectional
        self.table = nn.Embedding(NUM_BUCKETS, n_heads)

    def forward(self, query_len: int, key_len: int, query_offset: int = 0) -> torch.Tensor:
        """[1, H, query_len, key_len] float bias for queries at positions query_offset.. and keys at 0.."""
        device = self.table.weight.device
        queries = torch.arange(query_offset, query_offset + query_len, device=device)[:, None]
        keys = torch.arange(key_len, device=device)[None, :]
        buckets = relative_position_bucket(keys - queries, self.bidirectional, NUM_BUCKETS, MAX_DISTANCE)
        return self.table(buckets).permute(2, 0, 1)[None]


def biased_mask(bias: torch.Tensor, mask: torch.Tensor | None, causal: bool) -> torch.Tensor:
    """The position bias [1, H, Sq, Sk] with -inf where the bool `mask` [B|1, 1, Sq, Sk] forbids attending
    (and above the diagonal when `causal`): the float mask scaled_dot_product_attention adds to the scores."""
    if causal:
        q, k = bias.shape[-2:]
        allowed = torch.ones(q, k, dtype=torch.bool, device=bias.device).tril(k - q)
        bias = bias.masked_fill(~allowed, float("-inf"))
    return bias if mask is None else bias.masked_fill(~mask, float("-inf"))
