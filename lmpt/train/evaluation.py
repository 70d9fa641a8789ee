"""What the loop measures of the model between its steps: validation (the held-out batches of every source, and the
objective's own yardstick), RUN/best kept, and downstream curve points.

- RUN/best: after each evaluation whose val_loss is the lowest so far, the model's weights (only: no optimizer, it
  is cheap) go to RUN/best (lmpt.rundir.best). The best so far travels in LoopState, so a resumed run keeps the same
  best and replaces it exactly when the uninterrupted run would.
- Curve points: figures of the live model taken by a scorer built above this layer (the zero-shot tasks of
  `downstream.score_every`, lmpt.downstream.run_tasks) and handed down through run_training, so the training layer
  imports nothing of downstream. Taking a point changes no training number: the model is scored in eval mode without
  gradients, its train mode restored after, and the random streams (CPU and the device's) are forked, so the dropout
  and masking draws after the point are those a run without points makes.
- What the held-out figures call for saying (HeldOutWatch), each once: held-out loss worse than a uniform guess over
  the vocabulary (the model predicts unseen text worse than knowing nothing of it), and held-out loss rising while
  training loss falls (the model memorises its training text: a small corpus over many epochs). The figure is the
  objective's own held-out nats per token (Measure.held_out_nats, the one val_bpb converts); a uniform guess over V
  pieces costs ln V of them."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypeGuard

import torch
from rich.markup import escape

from lmpt.batch import Batch
from lmpt.console import warn
from lmpt.model import LanguageModel, ModelOutput
from lmpt.objectives.base import Objective
from lmpt.rundir.best import improves, save_best
from lmpt.train.distributed import Distributed, full_model_state
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


class CurveScorer(Protocol):
    @property
    def every(self) -> int:
        """Steps between curve points (a multiple of trainer.eval_every); the last step takes one too."""
        ...

    def __call__(self, model: LanguageModel, objective: Objective) -> dict[str, float]:
        """The figures of `model` (in eval mode) as metrics.jsonl keys."""
        ...


def curve_due(scorer: CurveScorer | None, step: int, last: bool) -> TypeGuard[CurveScorer]:
    """Whether `step` takes a curve point."""
    return scorer is not None and (step % scorer.every == 0 or last)


def take_curve_point(
    scorer: CurveScorer, model: LanguageModel, objective: Objective, device: torch.device
) -> dict[str, float]:
    """`scorer`'s figures of `model`, the training state as it was before: train mode, gradients, random streams."""
    was_training = model.training
    cuda = [device] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=cuda, device_type="cuda"), torch.no_grad():
        model.eval()
        try:
            return scorer(model, objective)
        finally:
            model.train(was_training)


RISE = 0.03
"""How far above its best held-out loss a later one must be to count as rising (3%: an evaluation's noise stays
below)."""


@dataclass
class HeldOutWatch:
    vocab_size: int
    epochs_per_step: float | None = None
    """Epochs of the training text one step makes (None: not known), to say how often the text was seen."""
    best: tuple[int, float, float | None] | None = None
    """(step, held-out nats, training loss then) of the lowest held-out loss so far."""
    said: set[str] = field(default_factory=set)

    @property
    def uniform_nats(self) -> float:
        return math.log(self.vocab_size)

    def consider(self, step: int, nats: float | None, train_loss: float | None) -> list[str]:
        """The warnings the evaluation at `step` calls for (each kind once a run)."""
        if nats is None or not math.isfinite(nats):
            return []
        said = []
        if nats > self.uniform_nats and "uniform" not in self.said:
            said.append(
                f"held-out loss {nats:.3f} at step {step} is worse than a uniform guess over the {self.vocab_size:,} "
                f"pieces ({self.uniform_nats:.3f}): the model predicts unseen text worse than knowing nothing of it"
                f"{self._seen(step)}; give it more text (docs/data.md), or fewer steps"
            )
            self.said.add("uniform")
        if self.best is None or nats < self.best[1]:
            self.best = (step, nats, train_loss)
        else:
            at, low, low_train = self.best
            falling = train_loss is not None and low_train is not None and train_loss < low_train
            if nats > low * (1 + RISE) and falling and "rising" not in self.said:
                said.append(
                    f"held-out loss rose from {low:.3f} at step {at} to {nats:.3f} at step {step} while training loss "
                    f"fell from {low_train:.3f} to {train_loss:.3f}: the model memorises its training text"
                    f"{self._seen(step)}; RUN/best keeps the best weights (trainer.keep_best), and more text or fewer "
                    "steps train a model that generalises"
                )
                self.said.add("rising")
        return said

    def say(self, step: int, nats: float | None, train_loss: float | None, main: bool) -> None:
        """`consider`'s warnings, on the console and in lmpt.log, by the main process."""
        for line in self.consider(step, nats, train_loss):
            if main:
                warn(escape(line))

    def _seen(self, step: int) -> str:
        if self.epochs_per_step is None:
            return ""
        return f" (it has seen its text {self.epochs_per_step * step:,.0f} times)"
