"""RUN/best: the weights of the evaluation with the lowest val_loss, kept beside the last checkpoint (as nanoGPT and
the transformers Trainer keep theirs). Only the weights: it is a model to use, never a point to resume from (the
run's checkpoints are). The safetensors header is the authority (arch, vocab_size, step, val_loss); best.json beside
it says the same for people and scripts."""

from __future__ import annotations

import json
import math
from pathlib import Path

from omegaconf import DictConfig

from lmpt.errors import LmptError
from lmpt.safe_files import save_weights, write_atomically

BEST_DIR = "best"
BEST_MODEL = "model.safetensors"
BEST_RECORD = "best.json"


def improves(val_loss: float | None, best: dict) -> bool:
    """A finite `val_loss` below the best so far (none yet: any finite one); a tie keeps the earlier step."""
    if val_loss is None or not math.isfinite(val_loss):
        return False
    return not best or val_loss < best["val_loss"]


def save_best(run_dir: Path, state: dict, arch: str, vocab_size: int, step: int, val_loss: float) -> None:
    """The weights of `step` as RUN/best/model.safetensors, then best.json; each file is whole or absent."""
    directory = run_dir / BEST_DIR
    directory.mkdir(exist_ok=True)
    found = {"step": str(step), "val_loss": repr(val_loss)}
    save_weights(directory / BEST_MODEL, state, {"arch": arch, "vocab_size": str(vocab_size), **found})
    record = json.dumps({"step": step, "val_loss": val_loss}) + "\n"
    write_atomically(directory / BEST_RECORD, lambda tmp: tmp.write_text(record))


def no_best(run_dir: Path, config: DictConfig) -> LmptError:
    """Why the run in `run_dir` (trained with `config`) has no RUN/best, in one line that names the way out."""
    trainer = config.get("trainer", {})
    every, keep = trainer.get("eval_every", 0), trainer.get("keep_best", True)
    if not keep:
        why = "it was trained with trainer.keep_best=false"
    elif not every:
        why = "it never evaluated (trainer.eval_every=0)"
    else:
        why = f"no evaluation has finished yet (trainer.eval_every={every})"
    return LmptError(f"{run_dir} has no best checkpoint: {why}: use the last (give {run_dir} itself)")
