"""The tied output head and its float32 cross-entropy, evaluated only on loss-bearing positions.

The selected rows are gathered first, so the head's matmul and softmax run on N rows instead of B*S (an
MLM batch selects 15%). A compiled model (`LanguageModel.compile_parts`) keeps this: the gather stays
eager and the head is compiled with the row count N dynamic, so batches with different numbers of targets
share one graph instead of recompiling, and the head does no work on the other positions."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from lmpt.batch import IGNORE

RowsLoss = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


def rows_loss(
    hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, excluded: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row float32 cross-entropy of the head `weight` [V, d] on `hidden` [N, d] against `targets` [N], and
    whether the target has the top logit (amax is a cheaper pass than argmax; they differ only on exact ties).
    `excluded` [V] bool: ids given no probability (their logits -inf; mdlm never predicts [MASK])."""
    logits = (hidden @ weight.t()).float()
    if excluded is not None:
        logits = logits.masked_fill(excluded, float("-inf"))
    loss = F.cross_entropy(logits, targets, reduction="none")
    with torch.no_grad():
        correct = logits.gather(1, targets[:, None])[:, 0] >= logits.amax(dim=-1)
    return loss, correct


def compiled_rows_loss(backend: str = "inductor", loss_of_rows: RowsLoss = rows_loss) -> RowsLoss:
    """`loss_of_rows` under torch.compile with the number of rows dynamic from the first call (no recompiles)."""
    compiled = torch.compile(loss_of_rows, backend=backend)

    def run(hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        torch._dynamo.maybe_mark_dynamic(hidden, 0)
        torch._dynamo.maybe_mark_dynamic(targets, 0)
        return compiled(hidden, weight, targets)

    return run


def token_losses(
    hidden: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor, loss_of_rows: RowsLoss = rows_loss
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(loss [N] float32, correct [N] bool, batch row [N]) at the N positions of `labels` [B, S] that are
    not IGNORE, in row-major order; `hidden` [B, S, d], `weight` [V, d] the tied head."""
    selected = labels != IGNORE
    loss, correct = loss_of_rows(hidden[selected], weight, labels[selected])
    return loss, correct, selected.nonzero()[:, 0]
