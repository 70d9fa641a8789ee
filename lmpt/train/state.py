"""The trainer's own state (besides model, optimizer and schedule) that each checkpoint carries to continue bit for
bit, and how it reads from and writes to the checkpoint's trainer part."""

from __future__ import annotations

from dataclasses import dataclass, field

from lmpt.train.loggers import new_wandb_id


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
