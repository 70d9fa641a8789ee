"""Pseudo-log-likelihood of an encoder (Salazar et al., 2020, "Masked Language Model Scoring"): each token is
scored with only that token masked, so no masking rate biases the figure. A window of L scoreable tokens
becomes L copies, copy j with token j replaced by [MASK] and labelled there only; the copies go through the
model `batch_size` at a time. Pseudo-perplexity = exp(total nats / scored tokens)."""

from __future__ import annotations

from collections.abc import Iterator

import torch

from lmpt.batch import IGNORE, Batch
from lmpt.inference.progress import WorkBar
from lmpt.inference.scoring import Text
from lmpt.objectives.measure import TextScore, framed_rows, sum_token_losses
from lmpt.objectives.sequences import pad_rows
from lmpt.rundir.trained import Trained


def masked_copies(row: torch.Tensor, positions: torch.Tensor, mask_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs, labels), both [len(positions), len(row)]: copy j is `row` with positions[j] replaced by
    `mask_id`, labelled with the original token there and IGNORE everywhere else."""
    copies = torch.arange(positions.numel())
    inputs = row.repeat(positions.numel(), 1)
    inputs[copies, positions] = mask_id
    labels = torch.full_like(inputs, IGNORE)
    labels[copies, positions] = row[positions]
    return inputs, labels


def score_pll(
    trained: Trained, text: Text, seq_len: int, batch_size: int, device, bar: WorkBar, sizes: torch.Tensor | None = None
) -> TextScore:
    """Pseudo-log-likelihood of every ordinary token of the text (eos and other reserved ids are not scored: a
    masked LM is never trained to predict them); `bar` counts masked copies. `sizes`: tokenizer.piece_bytes(),
    given by a caller that scores many short texts (zero-shot multiple choice), else computed here."""
    special = trained.tokenizer.special
    segments = torch.zeros(1, seq_len, dtype=torch.long) if trained.objective.n_segments else None
    rows = framed_rows(text.tokens, seq_len, *trained.objective.text_frame(special))
    bar.start(sum(int((row >= special.first_ordinary).sum()) for row in rows))

    def batches() -> Iterator[Batch]:
        for row in rows:
            positions = torch.nonzero(row >= special.first_ordinary).flatten()
            inputs, labels = masked_copies(row, positions, special.mask)
            for copy_inputs, copy_labels in zip(inputs, labels, strict=True):
                yield Batch(
                    input_ids=pad_rows([copy_inputs], seq_len, special.pad),
                    labels=pad_rows([copy_labels], seq_len, IGNORE),
                    attention="bidirectional",
                    segment_ids=segments,
                )

    sizes = trained.tokenizer.piece_bytes() if sizes is None else sizes
    score = sum_token_losses(trained.model, batches(), batch_size, sizes, device, bar)
    score.windows = len(rows)  # windows of text, not masked copies
    return score
