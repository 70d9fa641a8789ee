"""Start-up checks of an objective: its settings (each failure one LmptError line naming the key), and its corpus
requirements, checked on every split before any model is built."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lmpt.errors import LmptError

if TYPE_CHECKING:
    from lmpt.config.schema import DataConfig
    from lmpt.data.cache import PreparedData
    from lmpt.objectives.base import Objective


def require_open_unit(value: float, key: str) -> float:
    """`key` must lie strictly between 0 and 1."""
    value = float(value)
    if not 0.0 < value < 1.0:
        raise LmptError(f"{key}={value:g} must be in (0, 1)")
    return value


def require_fraction(value: float, key: str) -> float:
    """`key` must lie in [0, 1]."""
    value = float(value)
    if not 0.0 <= value <= 1.0:
        raise LmptError(f"{key}={value:g} must be in [0, 1]")
    return value


def require_at_least(value: float, key: str, minimum: float) -> float:
    """`key` must be at least `minimum`."""
    value = float(value)
    if not value >= minimum:
        raise LmptError(f"{key}={value:g} must be >= {minimum:g}")
    return value


def _listed(key: str, paths: list[str]) -> str:
    shown = ", ".join(str(p) for p in paths[:3])
    return f"{key}=[{shown}{', ...' if len(paths) > 3 else ''}]"


def split_text(data_cfg: DataConfig, split: str) -> str:
    """How an error names a split: "the training text (data.paths=[...])", "the validation text
    (data.val_paths=[...])" or "the validation text (the data.val_fraction=0.05 held out of data.paths=[...])"."""
    if data_cfg.sources:  # a mixture: its sources hold the text
        names = ", ".join(s.name for s in data_cfg.sources)
        return f"the {'training' if split == 'train' else 'validation'} text (data.sources: {names})"
    if split == "train":
        return f"the training text ({_listed('data.paths', list(data_cfg.paths))})"
    if data_cfg.val_paths:
        return f"the validation text ({_listed('data.val_paths', list(data_cfg.val_paths))})"
    return (
        f"the validation text (the data.val_fraction={data_cfg.val_fraction:g} held out of "
        f"{_listed('data.paths', list(data_cfg.paths))})"
    )


def check_splits(objective: Objective, data: PreparedData, data_cfg: DataConfig) -> None:
    """Refuse (one LmptError line) a training or validation split the objective cannot use."""
    objective.check_corpus(data.train, split_text(data_cfg, "train"))
    objective.check_corpus(data.val, split_text(data_cfg, "val"))
