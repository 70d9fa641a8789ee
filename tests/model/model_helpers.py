"""Tiny configs and batches shared by the model tests (imported as a plain module: pytest's rootdir
insertion puts this folder on sys.path)."""

from __future__ import annotations

import torch

from lmpt.batch import Batch
from lmpt.config.schema import ModelConfig
from lmpt.model import LanguageModel, build_model

VOCAB = 100
PAD = 0


def tiny_config(**overrides: object) -> ModelConfig:
    """d=32, 2 layers, 4 heads: small enough for CPU tests in milliseconds."""
    values: dict = dict(name="test", d_model=32, n_layers=2, n_heads=4, ffn_dim=64, max_seq_len=64)
    values.update(overrides)
    return ModelConfig(**values)


def tiny_model(arch: str, seed: int = 0, **kwargs: int) -> LanguageModel:
    torch.manual_seed(seed)
    return build_model(tiny_config(), arch, VOCAB, PAD, **kwargs).eval()


def random_ids(batch: int, seq: int, seed: int = 1) -> torch.Tensor:
    """Ids in [1, VOCAB): never the pad id."""
    return torch.randint(1, VOCAB, (batch, seq), generator=torch.Generator().manual_seed(seed))


def all_labels(ids: torch.Tensor) -> torch.Tensor:
    """Every position carries loss (labels arbitrary but fixed)."""
    return (ids * 7 + 3) % VOCAB


def hidden(model: LanguageModel, ids: torch.Tensor, **batch_fields: object) -> torch.Tensor:
    """Final hidden states for a batch with the given fields."""
    labels = batch_fields.pop("labels", None)
    if labels is None:
        labels = all_labels(batch_fields.get("decoder_input_ids", ids))  # type: ignore[arg-type]
    return model.hidden_states(Batch(input_ids=ids, labels=labels, **batch_fields))  # type: ignore[arg-type]
