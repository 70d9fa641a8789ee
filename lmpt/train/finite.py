"""Weights that cannot train: a model whose parameters went inf or NaN (optimizer.lr too high) is never
checkpointed, and its run never reported completed."""

from __future__ import annotations

import torch

from lmpt.errors import LmptError
from lmpt.train.distributed import Distributed


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
