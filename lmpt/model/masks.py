"""Boolean attention masks [B, 1, Sq, Sk] (True = may attend), built by small pure functions and
combined by AND. The attention layer broadcasts the head dimension."""

from __future__ import annotations

import torch

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
