"""Keeping RUN/best during training: after each evaluation whose val_loss is the lowest so far, the model's weights
(only: no optimizer, it is cheap) go to RUN/best (lmpt.rundir.best). The best so far travels in LoopState, so a
resumed run keeps the same best and replaces it exactly when the uninterrupted run would."""

from __future__ import annotations

from pathlib import Path

import torch

from lmpt.rundir.best import improves, save_best
from lmpt.train.distributed import Distributed, full_model_state


class BestKeeper:
    """Writes RUN/best for a run that evaluates periodically (trainer.eval_every > 0 and trainer.keep_best)."""

    def __init__(
        self, run_dir: Path, model: torch.nn.Module, strategy: str, arch: str, vocab_size: int, ctx: Distributed
    ) -> None:
        self.run_dir, self.model, self.strategy = run_dir, model, strategy
        self.arch, self.vocab_size, self.ctx = arch, vocab_size, ctx

    def consider(self, best: dict, step: int, val: dict) -> dict:
        """The best after the evaluation `val` of `step`: a lower val_loss than `best` writes its weights (collective
        under FSDP: every rank agrees, the loss being summed over all ranks) and becomes the best."""
        val_loss = val.get("val_loss")
        if val_loss is None or not improves(val_loss, best):
            return best
        state = full_model_state(self.model, self.strategy)
        if self.ctx.is_main:
            save_best(self.run_dir, state, self.arch, self.vocab_size, step, float(val_loss))
        return {"step": step, "val_loss": float(val_loss)}
