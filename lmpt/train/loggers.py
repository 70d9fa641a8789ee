"""Where metrics go besides metrics.jsonl: TensorBoard and Weights & Biases, each on a switch, neither
needed to run lmpt. Both survive a resume with every step once: a resumed run logs again the steps after its
checkpoint, so TensorBoard purges its own events from that step on, and W&B (the run id lives in the checkpoint)
keeps the steps it already holds, which the resumed run repeats bit for bit."""

from __future__ import annotations

import math
import uuid
from pathlib import Path

from lmpt.config.schema import TrainerConfig
from lmpt.errors import LmptError


def _numbers(record: dict) -> dict[str, float]:
    return {k: float(v) for k, v in record.items() if k != "step" and isinstance(v, (int, float)) and math.isfinite(v)}


class TensorBoardSink:
    def __init__(self, run_dir: Path, first_step: int) -> None:
        """`first_step`: the first step this launch logs; events of an earlier launch from it on are purged."""
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as exc:
            raise LmptError("trainer.tensorboard=true needs TensorBoard: pip install tensorboard") from exc
        self.writer = SummaryWriter(log_dir=str(run_dir / "tensorboard"), purge_step=first_step)

    def write(self, record: dict) -> None:
        for key, value in _numbers(record).items():
            self.writer.add_scalar(key, value, record["step"])
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class WandbSink:
    def __init__(self, project: str, record: dict, run_dir: Path, run_id: str) -> None:
        """`record`: the run's whole config as plain data (W&B shows it beside the run)."""
        try:
            import wandb
        except ImportError as exc:
            raise LmptError("trainer.wandb=true needs Weights & Biases: pip install wandb") from exc
        self.wandb = wandb
        self.run = wandb.init(
            project=project,
            id=run_id,
            resume="allow",
            dir=str(run_dir),
            name=run_dir.name,
            config=record,
        )
        # W&B ignores a step below its run's step counter; the steps it holds already are the ones this launch
        # repeats (bit for bit), so they are left as they are and logging goes on from the first one it lacks
        self.held_below = int(getattr(self.run, "step", 0) or 0)

    def write(self, record: dict) -> None:
        if record["step"] >= self.held_below:
            self.run.log(_numbers(record), step=record["step"])

    def close(self) -> None:
        self.run.finish()


def new_wandb_id() -> str:
    return uuid.uuid4().hex[:16]


def open_sinks(trainer: TrainerConfig, record: dict, run_dir: Path, wandb_id: str, start_step: int) -> list:
    """The extra sinks `trainer` asks for (rank 0 only); `record`: the run's config as plain data; `start_step`: the
    step this launch starts from (the checkpoint's, 0 for a new run)."""
    sinks: list = []
    if trainer.tensorboard:
        sinks.append(TensorBoardSink(run_dir, first_step=start_step + 1))
    if trainer.wandb:
        sinks.append(WandbSink(trainer.wandb_project, record, run_dir, wandb_id))
    return sinks
