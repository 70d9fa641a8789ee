"""The training loop's state and its checkpoints: `LoopState`, what the trainer's part of a checkpoint carries
besides model, optimizer and schedule to continue bit for bit, and `Checkpoints`, which writes a checkpoint into the
run's store (rank roles, FSDP shards) and reads one back. Weights that cannot train are never written: a model whose
parameters went inf or NaN (optimizer.lr too high) is never checkpointed, and its run never reported completed; a
run whose steps stay non-finite is stopped (`LoopState.count_step`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from lmpt.console import console
from lmpt.errors import LmptError
from lmpt.rng import derive_seed
from lmpt.rundir.checkpoint import CheckpointStore, load_parts, load_sharded_into, save_sharded
from lmpt.train.distributed import Distributed
from lmpt.train.metrics import new_wandb_id


@dataclass
class LoopState:
    """Everything besides model and optimizer that a checkpoint must carry to continue bit for bit."""

    step: int = 0
    nonfinite_in_row: int = 0
    last_val: dict = field(default_factory=dict)
    wandb_id: str = field(default_factory=new_wandb_id)
    best: dict = field(default_factory=dict)
    """The evaluation RUN/best holds ({"step", "val_loss"}), or empty while none is kept."""

    def checkpoint_fields(self) -> dict:
        """The entries of trainer.pt this state fills (besides the step, which the data position repeats)."""
        return {
            "nonfinite_in_row": self.nonfinite_in_row,
            "last_val": self.last_val,
            "wandb_id": self.wandb_id,
            "best": self.best,
        }

    @classmethod
    def from_checkpoint(cls, trainer: dict, wandb_id: str) -> LoopState:
        """The state a checkpoint's trainer part holds; older checkpoints lack wandb_id (`wandb_id` then) and best."""
        return cls(
            step=trainer["step"],
            nonfinite_in_row=trainer["nonfinite_in_row"],
            last_val=trainer["last_val"],
            wandb_id=trainer.get("wandb_id", wandb_id),
            best=trainer.get("best", {}),
        )

    def count_step(self, finite: bool, max_nonfinite_steps: int) -> None:
        """Count the optimizer step just taken (`finite`: its gradient was); `max_nonfinite_steps` non-finite ones
        in a row stop the run."""
        if finite:
            self.nonfinite_in_row = 0
            return
        self.nonfinite_in_row += 1
        console.print(f"[bold yellow]step {self.step + 1}: non-finite gradient, step skipped[/]")
        if self.nonfinite_in_row >= max_nonfinite_steps:
            raise LmptError(
                f"{self.nonfinite_in_row} steps in a row had a non-finite loss or gradient; stopped. "
                "The last good checkpoint is intact: lower optimizer.lr or use trainer.precision=fp32"
            )


def seed_dropout(seed: int, rank: int) -> None:
    """A new run's dropout stream: seeded per rank, after the initial weights (the same on every rank)."""
    torch.manual_seed(derive_seed(seed, "dropout", rank))


def nonfinite_parameters(model: torch.nn.Module) -> list[str]:
    """Names of the parameters holding an inf or NaN (this rank's shard of each under FSDP)."""
    names, params = zip(*model.named_parameters(), strict=True)
    local = [p.to_local() if hasattr(p, "to_local") else p for p in params]
    finite = torch.stack([torch.isfinite(p.detach()).all() for p in local]).tolist()
    return [name for name, ok in zip(names, finite, strict=True) if not ok]


def refuse_nonfinite_weights(model: torch.nn.Module, ctx: Distributed, step: int) -> None:
    """Collective: raise LmptError on every rank when any rank's weights are non-finite."""
    bad = nonfinite_parameters(model)
    (any_bad,) = ctx.any(bool(bad))
    if any_bad:
        named = f" ({', '.join(bad[:3])}{' ...' if len(bad) > 3 else ''})" if bad else ""
        raise LmptError(
            f"the weights are non-finite at step {step}{named}: neither a checkpoint nor the final model is written "
            "and the run is not complete (earlier checkpoints are intact); lower optimizer.lr and start again"
        )


class Checkpoints:
    """The run's checkpoints as the loop writes and reads them: `store` (RUN/checkpoints), the process group `ctx`,
    and whether model and optimizer are `sharded` (FSDP: written by every rank through torch.distributed.checkpoint,
    the rest by rank 0)."""

    def __init__(self, store: CheckpointStore, ctx: Distributed, sharded: bool) -> None:
        self.store, self.ctx, self.sharded = store, ctx, sharded

    def save(
        self, step: int, model: torch.nn.Module, optimizer: torch.optim.Optimizer, parts: Callable[[], dict]
    ) -> None:
        """Write the checkpoint of `step`; `parts`: its parts (collective under torchrun: every rank contributes its
        rank state), besides model and optimizer when they are sharded. Rank 0 writes replicated state; under FSDP
        every rank first writes its shards into the same staging directory. The others wait until rank 0 has
        committed. Non-finite weights are never saved."""
        refuse_nonfinite_weights(model, self.ctx, step)
        if not self.sharded:
            replicated = parts()
            if self.ctx.is_main:
                self.store.save(step, replicated)
            self.ctx.barrier()
            return
        staging = self.store.staging(step)
        if self.ctx.is_main:
            self.store.begin(step)
        self.ctx.barrier()
        save_sharded(model, optimizer, staging)
        sharded = parts()
        self.ctx.barrier()
        if self.ctx.is_main:
            self.store.commit(step, staging, sharded)
        self.ctx.barrier()

    def load(
        self, checkpoint: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer, device: torch.device
    ) -> dict:
        """Load `checkpoint`'s model and optimizer states into `model` and `optimizer`; returns its trainer part. A
        checkpoint of another world size is refused: each rank's data and random streams depend on it."""
        parts = load_parts(checkpoint, map_location=device)
        trainer = parts["trainer"]
        if trainer["world_size"] != self.ctx.world_size:
            raise LmptError(
                f"{checkpoint} was written by {trainer['world_size']} process(es) and this launch has "
                f"{self.ctx.world_size}: resume with torchrun --nproc_per_node={trainer['world_size']} "
                "(each rank's data and random streams depend on the world size)"
            )
        if self.sharded:
            load_sharded_into(model, optimizer, checkpoint)
        else:
            model.load_state_dict(parts["model"])
            optimizer.load_state_dict(parts["optimizer"])
        return trainer
