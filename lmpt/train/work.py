"""What a run has spent: tokens, loss-bearing tokens, FLOPs and training seconds, summed over processes and
launches. metrics.jsonl records them, curves are drawn against them, budgets are measured in them."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

from lmpt.batch import Batch
from lmpt.train.distributed import Distributed
from lmpt.train.efficiency import training_flops


@dataclass
class Work:
    """Cumulative work of a run over every process and every launch (carried in the checkpoint)."""

    tokens: int = 0
    """Non-padding input tokens (encoder and decoder inputs)."""
    loss_tokens: int = 0
    """Tokens that carried loss."""
    flops: float = 0.0
    """Training FLOPs by the model's own count (lmpt.train.efficiency.training_flops)."""
    seconds: float = 0.0
    """Wall-clock seconds of training steps, waiting for data included (evaluation and checkpoints not)."""

    def state_dict(self) -> dict:
        return asdict(self)

    def load_state_dict(self, state: dict) -> None:
        for key, value in state.items():
            setattr(self, key, value)

    def spent(self, unit: str) -> float:
        """The amount spent in a budget's unit: tokens, flops or minutes."""
        return {"tokens": self.tokens, "flops": self.flops, "minutes": self.seconds / 60}[unit]

    def record(self) -> dict:
        """The cumulative counts every metrics.jsonl record carries (the x axes of curves against compute)."""
        return {"tokens": self.tokens, "loss_tokens": self.loss_tokens, "flops": self.flops}


def count_tokens(batch: Batch, pad_id: int) -> int:
    """Non-padding input tokens (encoder and decoder inputs) of a batch still on the CPU: no device sync."""
    total = int((batch.input_ids != pad_id).sum())
    if batch.decoder_input_ids is not None:
        total += int((batch.decoder_input_ids != pad_id).sum())
    return total


def add_step(work: Work, micro_batches: list[Batch], model, objective, examples: int, ctx: Distributed) -> None:
    """Add one optimizer step of `examples` examples over all processes to `work`, counted on this process's
    CPU batches (one small all-reduce per step under torchrun)."""
    counts = [
        sum(count_tokens(b, objective.special.pad) for b in micro_batches),
        sum(b.loss_tokens for b in micro_batches),
    ]
    if ctx.enabled:
        device = next(model.parameters()).device
        counts = [int(c) for c in ctx.sum_(torch.tensor(counts, device=device)).tolist()]
    tokens, loss_tokens = counts
    work.tokens += tokens
    work.loss_tokens += loss_tokens
    work.flops += training_flops(model, examples, loss_tokens, objective.seq_len, objective.target_length)
