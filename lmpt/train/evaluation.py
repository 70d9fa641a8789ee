"""Validation during training: the held-out batches of every source, and the fixed yardstick of masked runs."""

from __future__ import annotations

from collections.abc import Callable

import torch

from lmpt.batch import Batch
from lmpt.model import LanguageModel, ModelOutput
from lmpt.objectives.base import Objective
from lmpt.objectives.yardstick import bound_bits_per_token, draw_groups, exact_bits_per_token
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

    def __call__(self, batches: dict[str, list[Batch]], fixed_batches: list[Batch] = ()) -> dict:
        """Validation metrics over every source's held-out batches (val_*), and per source (val_*/NAME) when
        the run mixes several; with `fixed_batches` (masked objectives) also the fixed yardstick:
        val_fixed_loss / _acc / _ppl, masked tokens at the shared eval_mask_prob; for a likelihood model the
        bits per token yardstick: exact for clm, for mdlm the bound over the fixed passes of `fixed_batches`."""
        self.model.eval()
        overall, record = RunningStats(), {}
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
        if self.objective.likelihood == "exact":
            result |= exact_bits_per_token(means["loss"])
        elif self.objective.likelihood == "bound" and fixed_batches:
            passes = draw_groups(list(fixed_batches), self.objective.yardstick_draws)
            result |= bound_bits_per_token([self.stats(group).means()["loss"] for group in passes])
        elif fixed_batches:
            fixed = self.stats(list(fixed_batches)).means()
            loss = fixed[self.objective.perplexity_of]
            result.update(val_fixed_loss=loss, val_fixed_acc=fixed["acc"], val_fixed_ppl=perplexity(loss))
        return result | record
