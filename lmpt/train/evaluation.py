"""Validation during training: the held-out batches of every source, and the objective's own yardstick."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from lmpt.batch import Batch
from lmpt.model import LanguageModel, ModelOutput
from lmpt.objectives.base import Objective
from lmpt.train.distributed import Distributed
from lmpt.train.metrics import RunningStats, perplexity
from lmpt.train.precision import Precision


class Evaluator:
    """Scores held-out batches with the model in eval mode, each rank its share, sums added over the ranks."""

    def __init__(
        self,
        model: LanguageModel,
        forward: Callable[[Batch], ModelOutput],
        objective: Objective,
        precision: Precision,
        ctx: Distributed,
    ) -> None:
        self.model, self.forward, self.objective = model, forward, objective
        self.precision, self.ctx = precision, ctx

    @torch.no_grad()
    def stats(self, batches: list[Batch]) -> RunningStats:
        """Sums and counts of the objective's stats over held-out batches, shared out over the ranks."""
        stats = RunningStats()
        for batch in batches[self.ctx.rank :: self.ctx.world_size]:  # ranks share the held-out batches
            batch = batch.to(self.precision.device, non_blocking=True)
            with self.precision.autocast():
                _, batch_stats = self.objective.loss(self.forward(batch), batch)
            stats.add(batch_stats)
        stats.sum_over(self.ctx)
        return stats

    def __call__(self, batches: dict[str, list[Batch]], fixed_batches: Sequence[Batch] = ()) -> dict:
        """Validation metrics over every source's held-out batches (val_*), and per source (val_*/NAME) when
        the run mixes several; and the objective's yardstick (lmpt.objectives.measure) from `fixed_batches`: bits
        per token for a likelihood (exact for clm, the bound over mdlm's fixed passes), val_fixed_* at the shared
        masking rate for masked objectives, fim's val_fim_* on rearranged text."""
        self.model.eval()
        overall, record = RunningStats(), dict[str, float]()
        for name, source_batches in batches.items():
            stats = self.stats(source_batches)
            overall.merge(stats)
            if name:
                means = stats.means()
                record |= {f"val_{k}/{name}": v for k, v in means.items()}
                record[f"val_ppl/{name}"] = perplexity(means[self.objective.perplexity_of])
        means = overall.means()
        result = {f"val_{name}": value for name, value in means.items()}
        result["val_ppl"] = perplexity(means[self.objective.perplexity_of])
        result |= self.objective.measure.figures(means, lambda group: self.stats(group).means(), list(fixed_batches))
        return result | record
