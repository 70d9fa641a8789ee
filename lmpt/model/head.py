"""The tied output head and its float32 cross-entropy, evaluated only on loss-bearing positions.

Eager: the selected rows are gathered first, so the head's matmul and softmax run on N rows instead of
B*S (an MLM batch selects 15%). Under torch.compile the head runs on every position with static shapes
and `ignore_index`, and only the final selection (a data-dependent shape) is left to eager code, so
batches with different numbers of targets share one graph instead of recompiling."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from lmpt.batch import IGNORE


def _loss_and_correct(logits: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row float32 cross-entropy and whether the target has the top logit (amax is a cheaper pass
    than argmax; they differ only on exact ties)."""
    logits = logits.float()
    loss = F.cross_entropy(logits, targets, ignore_index=IGNORE, reduction="none")
    with torch.no_grad():
        target_logit = logits.gather(1, targets.clamp(min=0)[:, None])[:, 0]
        correct = (target_logit >= logits.amax(dim=-1)) & (targets != IGNORE)
    return loss, correct


@torch.compiler.disable
def _keep_selected(
    loss: torch.Tensor, correct: torch.Tensor, selected: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The data-dependent end of the compiled head: per-position values at the selected positions only."""
    flat = selected.reshape(-1)
    return loss[flat], correct[flat], selected.nonzero()[:, 0]


def token_losses(
    hidden: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(loss [N] float32, correct [N] bool, batch row [N]) at the N positions of `labels` [B, S] that are
    not IGNORE, in row-major order; `hidden` [B, S, d], `weight` [V, d] the tied head."""
    selected = labels != IGNORE
    if torch.compiler.is_compiling():
        loss, correct = _loss_and_correct(hidden.reshape(-1, hidden.shape[-1]) @ weight.t(), labels.reshape(-1))
        return _keep_selected(loss, correct, selected)
    loss, correct = _loss_and_correct(hidden[selected] @ weight.t(), labels[selected])
    return loss, correct, selected.nonzero()[:, 0]
