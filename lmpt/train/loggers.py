"""Where metrics go besides metrics.jsonl: TensorBoard and Weights & Biases, each on a switch, neither
needed to run lmpt. The W&B run id lives in the checkpoint, so a resumed run continues the same curve."""

from __future__ import annotations

import math
import uuid
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from lmpt.errors import LmptError


def _numbers(record: dict) -> dict[str, float]:
    return {k: float(v) for k, v in record.items() if k != "step" and isinstance(v, (int, float)) and math.isfinite(v)}


class TensorBoardSink:
    def __init__(self, run_dir: Path) -> None:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as exc:
            raise LmptError("trainer.tensorboard=true needs TensorBoard: pip install tensorboard") from exc
        self.writer = SummaryWriter(log_dir=str(run_dir / "tensorboard"))

    def write(self, record: dict) -> None:
        for key, value in _numbers(record).items():
            self.writer.add_scalar(key, value, record["step"])
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class WandbSink:
    def __init__(self, cfg: DictConfig, run_dir: Path, run_id: str) -> None:
        try:
            import wandb
        except ImportError as exc:
            raise LmptError("trainer.wandb=true needs Weights & Biases: pip install wandb") from exc
        self.wandb = wandb
        self.run = wandb.init(
            project=cfg.trainer.wandb_project, id=run_id, resume="allow", dir=str(run_dir),
            name=run_dir.name, config=OmegaConf.to_container(cfg, resolve=True),
        )  # fmt: skip

    def write(self, record: dict) -> None:
        self.run.log(_numbers(record), step=record["step"])

    def close(self) -> None:
        self.run.finish()


def new_wandb_id() -> str:
    return uuid.uuid4().hex[:16]


def open_sinks(cfg: DictConfig, run_dir: Path, wandb_id: str) -> list:
    """The extra sinks this run asked for (rank 0 only)."""
    sinks: list = []
    if cfg.trainer.tensorboard:
        sinks.append(TensorBoardSink(run_dir))
    if cfg.trainer.wandb:
        sinks.append(WandbSink(cfg, run_dir, wandb_id))
    return sinks
