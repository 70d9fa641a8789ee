"""The tied output head and its float32 cross-entropy, evaluated only on loss-bearing positions.

The selected rows are gathered first, so the head's matmul and softmax run on N rows instead of B*S (an
MLM batch selects 15%). A compiled model (`LanguageModel.compile_parts`) keeps this: the gather stays
eager and the head is compiled with the row count N dynamic, so batches with different numbers of targets
share one graph instead of recompiling, and the head does no work on the other positions.

On a CPU in float32 a narrow model's head and its cross-entropy run fused, a block of rows at a time
(`ChunkedCrossEntropy`): each block's logits are reduced while in the core's cache and never kept. That replaces
log-softmax's output, the loss's dense zero gradient and log-softmax's backward, passes over an N x V matrix in
memory, with passes over a cache-sized block: the micro model's step spent half its time there (docs/benchmarks.md).
The gradient (softmax minus one-hot) is formed in place too: in the forward pass, while the block is in cache, when
the caller weighs every row alike (`uniform`: clm's mean, and every objective but mdlm's 1/t), else in the backward
pass from the block's logits computed again. The figures are those of the unfused head to float32 rounding
(tests/model/test_model_head.py)."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from lmpt.batch import IGNORE

RowsLoss = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


BLOCK_ELEMENTS = 2**18
"""Logits a block of rows holds in the fused head (1 MiB of float32, a core's L2 cache): rows = this over V."""
MIN_BLOCK_ROWS = 64
"""Fewer rows than this make the block's matmuls inefficient (a large vocabulary gets blocks past the cache)."""
FUSED_MAX_WIDTH = 256
"""Past this d_model the head's matmuls outweigh the passes fusing saves, and the matmul the fused backward computes
again costs more than they did (one thread, V 4,096, 2,048 rows: fused 81 ms against 125 at d 128, 145 against 161 at
256, 208 against 204 at 384, 291 against 249 at 512)."""


def rows_loss(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    targets: torch.Tensor,
    excluded: torch.Tensor | None = None,
    uniform: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row float32 cross-entropy of the head `weight` [V, d] on `hidden` [N, d] against `targets` [N], and
    whether the target has the top logit (amax is a cheaper pass than argmax; they differ only on exact ties).
    `excluded` [V] bool: ids given no probability (their logits -inf; mdlm never predicts [MASK]). Fused on a CPU in
    float32 up to FUSED_MAX_WIDTH (`ChunkedCrossEntropy`), the plain ops elsewhere (`unfused_rows_loss`: a GPU,
    autocast, torch.compile, a wide model). `uniform`: the caller reduces the losses by a mean or a sum, one weight
    for every row, so the fused head may form the gradient in the forward pass (a promise it checks: rows weighed
    differently after all get the gradient computed again, only slower)."""
    if (
        hidden.device.type == "cpu"
        and hidden.dtype == weight.dtype == torch.float32
        and hidden.shape[-1] <= FUSED_MAX_WIDTH
        and not torch.is_autocast_enabled("cpu")
        and not torch.compiler.is_compiling()
    ):
        early = uniform and torch.is_grad_enabled() and (hidden.requires_grad or weight.requires_grad)
        return ChunkedCrossEntropy.apply(hidden, weight, targets, excluded, early)
    return unfused_rows_loss(hidden, weight, targets, excluded)


def unfused_rows_loss(
    hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, excluded: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """`rows_loss` by PyTorch's own ops: the logits, log-softmax and the loss's gather, each a pass in memory."""
    logits = (hidden @ weight.t()).float()
    if excluded is not None:
        logits = logits.masked_fill(excluded, float("-inf"))
    loss = F.cross_entropy(logits, targets, reduction="none")
    with torch.no_grad():
        correct = logits.gather(1, targets[:, None])[:, 0] >= logits.amax(dim=-1)
    return loss, correct


class ChunkedCrossEntropy(torch.autograd.Function):
    """`rows_loss` fused, a block of rows at a time in one cache-sized buffer: each block's logits are reduced
    (log-sum-exp, target, top) while in cache and never kept. The gradient for a weight of 1 on every row is formed
    from the block in place, then and there, when `early` (the backward pass scales it by the row weight), else the
    backward pass computes the logits again and forms it from them."""

    @staticmethod
    def forward(ctx, hidden, weight, targets, excluded, early=False):
        rows = hidden.shape[0]
        block = max(1, min(rows, max(MIN_BLOCK_ROWS, BLOCK_ELEMENTS // max(1, weight.shape[0]))))  # 0 rows: none
        buffer = hidden.new_empty(block, weight.shape[0])
        loss, lse = hidden.new_empty(rows), hidden.new_empty(rows)
        correct = torch.empty(rows, dtype=torch.bool, device=hidden.device)
        grads = _empty_grads(hidden, weight, ctx.needs_input_grad) if early else None
        for start in range(0, rows, block):
            end = min(rows, start + block)
            part = _block_logits(hidden[start:end], weight, excluded, buffer[: end - start])
            target = part.gather(1, targets[start:end, None])[:, 0]
            top = part.amax(dim=1, keepdim=True)
            torch.ge(target, top[:, 0], out=correct[start:end])
            # log-sum-exp in place in the block (no temporaries: a fresh block-sized one is page-faulted on every call)
            sums = part.sub_(top).exp_().sum(dim=1)
            torch.add(sums.log(), top[:, 0], out=lse[start:end])
            torch.sub(lse[start:end], target, out=loss[start:end])
            if grads is not None:
                _block_gradient(part.div_(sums[:, None]), targets[start:end], hidden[start:end], weight, grads, start)
        ctx.save_for_backward(hidden, weight, targets, lse, excluded)
        ctx.block, ctx.grads = block, grads
        ctx.mark_non_differentiable(correct)
        return loss, correct

    @staticmethod
    def backward(ctx, grad_loss, _grad_correct):
        if ctx.grads is not None and (grad_loss.numel() == 0 or bool((grad_loss == grad_loss[0]).all())):
            scale = grad_loss[0] if grad_loss.numel() else 0.0  # out of place: a second backward scales them again
            return *(None if grad is None else grad * scale for grad in ctx.grads), None, None, None
        hidden, weight, targets, lse, excluded = ctx.saved_tensors
        grads = _empty_grads(hidden, weight, ctx.needs_input_grad)
        buffer = hidden.new_empty(ctx.block, weight.shape[0])
        for start in range(0, hidden.shape[0], ctx.block):
            end = min(hidden.shape[0], start + ctx.block)
            part = _block_logits(hidden[start:end], weight, excluded, buffer[: end - start])
            softmax = part.sub_(lse[start:end, None]).exp_()
            _block_gradient(softmax, targets[start:end], hidden[start:end], weight, grads, start, grad_loss[start:end])
        return *grads, None, None, None


def _empty_grads(
    hidden: torch.Tensor, weight: torch.Tensor, needs: tuple[bool, ...]
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """The gradients of `hidden` (filled block by block) and `weight` (summed over blocks), where asked for."""
    return (torch.empty_like(hidden) if needs[0] else None, torch.zeros_like(weight) if needs[1] else None)


def _block_gradient(
    softmax: torch.Tensor,
    targets: torch.Tensor,
    hidden: torch.Tensor,
    weight: torch.Tensor,
    grads: tuple[torch.Tensor | None, torch.Tensor | None],
    start: int,
    row_weights: torch.Tensor | None = None,
) -> None:
    """A block's share of the gradients: its softmax [n, V] made the logits' gradient in place (minus one-hot, times
    the rows' weights), then multiplied out into `grads` (rows `start`.. of the hidden one, added to the weight's)."""
    softmax[torch.arange(softmax.shape[0], device=softmax.device), targets] -= 1.0
    if row_weights is not None:
        softmax.mul_(row_weights[:, None])
    grad_hidden, grad_weight = grads
    if grad_hidden is not None:
        torch.mm(softmax, weight, out=grad_hidden[start : start + softmax.shape[0]])
    if grad_weight is not None:
        grad_weight.addmm_(softmax.t(), hidden)


def _block_logits(
    hidden: torch.Tensor, weight: torch.Tensor, excluded: torch.Tensor | None, out: torch.Tensor
) -> torch.Tensor:
    logits = torch.mm(hidden, weight.t(), out=out)
    return logits if excluded is None else logits.masked_fill_(excluded, float("-inf"))


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
