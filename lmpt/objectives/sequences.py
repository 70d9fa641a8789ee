"""Laying out variable-length rows as static-shape batch tensors (shared by span, prefix and ul2)."""

from __future__ import annotations

import torch

from lmpt.batch import IGNORE, Batch
from lmpt.tokenizer.special import SpecialTokens


def pad_rows(rows: list[torch.Tensor], length: int, value: int) -> torch.Tensor:
    """Stack 1-d int64 rows into [B, length], right-padded with `value`."""
    out = torch.full((len(rows), length), value, dtype=torch.long)
    for i, row in enumerate(rows):
        out[i, : row.numel()] = row
    return out


def decoder_inputs(labels: torch.Tensor, start: int, pad: int) -> torch.Tensor:
    """Decoder inputs of an encoder-decoder: the targets shifted right behind `start` (bos); IGNORE -> pad."""
    shifted = torch.full_like(labels, pad)
    shifted[:, 0] = start
    shifted[:, 1:] = labels[:, :-1]
    return shifted.masked_fill(shifted == IGNORE, pad)


def encoder_decoder_batch(
    inputs: list[torch.Tensor], targets: list[torch.Tensor], seq_len: int, target_len: int, special: SpecialTokens
) -> Batch:
    """Encoder inputs padded to `seq_len`; targets padded to `target_len` with IGNORE, decoder inputs
    the targets shifted right behind bos."""
    labels = pad_rows(targets, target_len, IGNORE)
    return Batch(
        input_ids=pad_rows(inputs, seq_len, special.pad),
        labels=labels,
        attention="bidirectional",
        decoder_input_ids=decoder_inputs(labels, special.bos, special.pad),
    )


def prefix_lm_batch(
    prefixes: list[torch.Tensor], targets: list[torch.Tensor], seq_len: int, special: SpecialTokens
) -> Batch:
    """Decoder-only prefix-LM form of (prefix, target) pairs: input = (prefix + target)[:-1], labels the
    next token, shifted once here. prefix_len = len(prefix); labels IGNORE at positions < prefix_len - 1, so
    every target token is a label: the first is predicted from the last prefix position, which sees only the
    prefix (as T5's prefix_lm and seqio's decoder-only converter do). Padding to `seq_len` with pad / IGNORE."""
    rows, label_rows = [], []
    for prefix, target in zip(prefixes, targets, strict=True):
        sequence = torch.cat([prefix, target])
        labels = sequence[1:].clone()
        labels[: max(prefix.numel() - 1, 0)] = IGNORE
        rows.append(sequence[:-1])
        label_rows.append(labels)
    return Batch(
        input_ids=pad_rows(rows, seq_len, special.pad),
        labels=pad_rows(label_rows, seq_len, IGNORE),
        attention="prefix",
        prefix_len=torch.tensor([p.numel() for p in prefixes], dtype=torch.long),
    )
