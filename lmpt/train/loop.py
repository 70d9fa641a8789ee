"""The training loop: optimizer steps with accumulation, clipping and AMP; periodic logging, evaluation
and checkpoints. It composes the components; each lives in its own module."""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from lmpt.batch import Batch
from lmpt.config.schema import TrainerConfig
from lmpt.model import LanguageModel, ModelOutput
from lmpt.objectives.base import Objective
from lmpt.train.budget import RunLength
from lmpt.train.display import Display
from lmpt.train.distributed import Distributed
from lmpt.train.evaluation import BestKeeper, CurveScorer, Evaluator, HeldOutWatch, curve_due, take_curve_point
from lmpt.train.metrics import (
    MetricsLog,
    RunningStats,
    Work,
    add_step,
    held_out_sizes,
    open_sinks,
    peak_flops,
    peak_memory_mb,
    perplexity,
    say_if_busy,
    with_bits_per_byte,
)
from lmpt.train.precision import Precision
from lmpt.train.preemption import PreemptionFlag
from lmpt.train.state import Checkpoints, LoopState, seed_dropout


@dataclass(frozen=True)
class StepParts:
    """What each optimizer step uses: the model and its objective, optimizer, schedule and precision."""

    model: LanguageModel
    objective: Objective
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    precision: Precision
    forward: Callable[[Batch], ModelOutput] | None = None
    """The DDP/FSDP wrapper when distributed (None: `model` itself); state dicts always come from `model`."""


@dataclass(frozen=True)
class Recorders:
    """Where the loop writes what it did: checkpoints, metrics.jsonl, the console, and optionally RUN/best and
    downstream curve points."""

    checkpoints: Checkpoints
    metrics: MetricsLog
    display: Display
    best: BestKeeper | None = None
    """None: no RUN/best (the run never evaluates before its end, or trainer.keep_best=false)."""
    curves: CurveScorer | None = None
    """None: no curve points (downstream.score_every=0)."""
    watch: HeldOutWatch | None = None
    """What the held-out loss calls for saying (lmpt.train.evaluation); None: nothing watched."""


class TrainLoop:
    def __init__(
        self,
        trainer: TrainerConfig,
        record: dict,
        parts: StepParts,
        recorders: Recorders,
        ctx: Distributed | None = None,
        length: RunLength | None = None,
    ) -> None:
        self.t = trainer
        self.record = record  # the run's whole config as plain data: each checkpoint carries it
        model, objective, precision = parts.model, parts.objective, parts.precision
        self.model, self.objective = model, objective
        self.forward = model if parts.forward is None else parts.forward
        self.optimizer, self.scheduler = parts.optimizer, parts.scheduler
        self.precision, self.device = precision, precision.device
        self.scaler = precision.grad_scaler()
        self.checkpoints, self.metrics, self.display = recorders.checkpoints, recorders.metrics, recorders.display
        self.ctx = ctx or Distributed()
        self.length = length or RunLength(self.t.max_steps)
        self.work = self.length.work  # restored in place on resume
        self.state, self.preemption, self.stats = LoopState(), PreemptionFlag(), RunningStats()
        self.interval_start, self.interval_started = Work(), time.perf_counter()  # both set again as `run` starts
        self.wall_before, self.launch_started = 0.0, time.perf_counter()  # earlier launches' wall, this one's start
        self.peak_flops, self.peak_source = peak_flops(self.device, precision.dtype or torch.float32)
        say_if_busy(self.device, precision.dtype or torch.float32)  # a run that trains says it; planning does not
        self.evaluate = Evaluator(model, self.forward, objective, precision, self.ctx)
        self.best, self.curves = recorders.best, recorders.curves
        self.watch, self.last_train_loss = recorders.watch, None

    # -- state ------------------------------------------------------------------------------------
    def _rank_state(self) -> dict:
        """State that differs between ranks: each rank's RNG streams and its partial metric sums."""
        rng = {"cpu": torch.get_rng_state()}
        if self.device.type == "cuda":
            rng["cuda"] = torch.cuda.get_rng_state(self.device)
        return {"rng": rng, "running_stats": self.stats.state_dict()}

    def checkpoint_parts(self) -> dict:
        """Collective under torchrun: every rank contributes its rank state. Sharded (FSDP) model and
        optimizer states are written separately, through torch.distributed.checkpoint."""
        replicated = (
            {}
            if self.checkpoints.sharded
            else {"model.safetensors": self.model.state_dict(), "optimizer.pt": self.optimizer.state_dict()}
        )
        return {
            **replicated,
            "trainer.pt": {
                "step": self.state.step,
                "data_position": {"step": self.state.step, "micro_step": 0},
                "world_size": self.ctx.world_size,
                "tokens_seen": self.work.tokens,
                "work": self.work.state_dict(),
                "wall_seconds": self.wall_seconds(),
                **self.state.checkpoint_fields(),
                "scheduler": self.scheduler.state_dict(),
                "scaler": self.scaler.state_dict(),
                "ranks": self.ctx.all_gather_object(self._rank_state()),
                "config": self.record,
            },
        }

    def save(self) -> None:
        """The checkpoint of this step (lmpt.train.state.Checkpoints.save): collective under torchrun."""
        self.checkpoints.save(self.state.step, self.model, self.optimizer, self.checkpoint_parts)

    def start_fresh(self) -> None:
        """A new run's dropout stream (lmpt.train.state.seed_dropout)."""
        seed_dropout(self.t.seed, self.ctx.rank)

    def restore(self, checkpoint: Path) -> None:
        trainer = self.checkpoints.load(checkpoint, self.model, self.optimizer, self.device)
        self.scheduler.load_state_dict(trainer["scheduler"])
        self.scaler.load_state_dict(trainer["scaler"])
        mine = trainer["ranks"][self.ctx.rank]
        torch.set_rng_state(mine["rng"]["cpu"].cpu())
        if "cuda" in mine["rng"] and self.device.type == "cuda":
            torch.cuda.set_rng_state(mine["rng"]["cuda"].cpu(), self.device)
        self.stats.load_state_dict(mine["running_stats"], self.device)
        self.work.load_state_dict(trainer.get("work", {"tokens": trainer["tokens_seen"]}))
        # an older checkpoint has no wall time: its training seconds are the least it took
        self.wall_before = float(trainer.get("wall_seconds", self.work.seconds))
        self.state = LoopState.from_checkpoint(trainer, self.state.wandb_id)

    # -- steps ------------------------------------------------------------------------------------
    def gradient_sync(self, final_micro_step: bool) -> contextlib.AbstractContextManager:
        """Gradients are reduced across ranks only on the last micro-step of an optimizer step."""
        fsdp_sync = getattr(self.forward, "set_requires_gradient_sync", None)
        ddp_no_sync = getattr(self.forward, "no_sync", None)
        if fsdp_sync is not None:  # FSDP2
            fsdp_sync(final_micro_step)
        elif not final_micro_step and ddp_no_sync is not None:  # DDP
            return ddp_no_sync()
        return contextlib.nullcontext()

    def train_step(self, micro_batches: list[Batch]) -> torch.Tensor:
        """One optimizer step over the accumulated micro-batches; returns the gradient norm."""
        self.model.train()
        examples = self.t.batch_size * self.t.grad_accum * self.ctx.world_size
        add_step(self.work, micro_batches, self.model, self.objective, examples, self.ctx)
        step_stats = RunningStats()
        for i, batch in enumerate(micro_batches):
            batch = batch.to(self.device, non_blocking=True)
            with self.gradient_sync(i == len(micro_batches) - 1), self.precision.autocast():
                out = self.forward(batch)
                loss, stats = self.objective.loss(out, batch)
                self.scaler.scale(loss / len(micro_batches)).backward()
            step_stats.add(stats)
        self.scaler.unscale_(self.optimizer)
        clip = self.t.grad_clip if self.t.grad_clip > 0 else math.inf
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), clip)
        if hasattr(grad_norm, "full_tensor"):  # FSDP: a DTensor holding the global norm
            grad_norm = grad_norm.full_tensor()
        finite = bool(torch.isfinite(grad_norm))
        if finite or self.scaler.is_enabled():
            self.scaler.step(self.optimizer)  # fp16: the scaler itself skips non-finite steps and lowers its scale
            self.scaler.update()
        if finite:
            self.stats.merge(step_stats)  # a skipped step's non-finite loss never reaches the logged means
        self.state.count_step(finite, self.t.max_nonfinite_steps)
        self.optimizer.zero_grad(set_to_none=True)
        self.work.seconds += time.perf_counter() - self.step_clock  # data wait included, evaluation not
        self.scheduler.step()  # after the work is counted: a budgeted schedule follows the share spent
        self.state.step += 1
        return grad_norm

    def wall_seconds(self) -> float:
        """The run's wall time over every launch: each launch's training loop from its start to its end (data waits,
        evaluations, curve points and checkpoints included), earlier launches as of the checkpoint this launch
        resumed from. Never less than `work.seconds`, the training steps' own time, which it contains."""
        return self.wall_before + (time.perf_counter() - self.launch_started)

    def log_record(self, grad_norm: torch.Tensor) -> dict:
        now = time.perf_counter()
        elapsed = max(now - self.interval_started, 1e-9)
        self.stats.sum_over(self.ctx)  # global-batch means: sums and counts add up over ranks
        means = self.stats.means()
        start, work = self.interval_start, self.work
        record: dict[str, float | None] = {"step": self.state.step, **means}
        if self.objective.perplexity_of in means:  # absent when every step since the last log was skipped
            record["ppl"] = perplexity(means[self.objective.perplexity_of])
        record.update(
            lr=float(self.scheduler.get_last_lr()[0]),
            grad_norm=float(grad_norm),
            interval_s=elapsed,  # the seconds the rates below are over: since the last log or this launch's start
            tokens_per_s=(work.tokens - start.tokens) / elapsed,
            loss_tokens_per_s=(work.loss_tokens - start.loss_tokens) / elapsed,
            # per device: global work over all devices' peak; the head counted on loss-bearing positions only
            mfu=self.mfu((work.flops - start.flops) / elapsed / self.ctx.world_size),
            peak_memory_mb=peak_memory_mb(self.device),
            **self.work.record(),
        )
        self.stats.reset()
        self.interval_start = replace(work)
        self.interval_started = now
        return record

    def mfu(self, flops_per_s: float) -> float | None:
        """Share of the peak one device used, never above 1: the peak is a measured lower bound of what the device
        can do, and so is a faster interval, which then becomes the peak. None when the dtype is emulated."""
        if self.precision.emulated:
            return None
        self.peak_flops = max(self.peak_flops, flops_per_s)
        return flops_per_s / self.peak_flops

    # -- the loop ---------------------------------------------------------------------------------
    def run(self, loader, val_batches: dict[str, list[Batch]], fixed_batches: Sequence[Batch] = ()) -> str:
        """Train to max_steps or until the budget is spent; returns "completed", or "preempted" after a stop
        signal (checkpointed). `fixed_batches`: the objective's yardstick batches (lmpt.objectives.measure)."""
        t = self.t
        if self.ctx.is_main:  # drop lines written after the checkpoint this run starts from (or before any)
            self.metrics.truncate_after(self.state.step)
        rng = torch.get_rng_state()
        steps = iter(loader)  # a DataLoader draws its base seed from the global RNG: keep dropout's stream intact
        torch.set_rng_state(rng)
        self.display.start(self.state.step)
        self.launch_started = self.interval_started = last_save = time.perf_counter()
        self.interval_start = replace(self.work)  # the first interval counts this launch's work, not the resumed run's
        val_sizes = held_out_sizes(val_batches, self.objective.tokenizer.piece_bytes(), self.objective.scored_tokens)
        run_dir, main = self.metrics.path.parent, self.ctx.is_main
        self.sinks = open_sinks(t, self.record, run_dir, self.state.wandb_id, self.state.step) if main else []
        try:
            with self.preemption as preemption:
                self.step_clock = time.perf_counter()
                for micro_batches in steps if not self.length.finished(self.state.step) else ():
                    grad_norm = self.train_step(micro_batches)
                    step = self.state.step
                    self.display.advance(step)
                    overdue = t.ckpt_minutes > 0 and time.perf_counter() - last_save >= 60 * t.ckpt_minutes
                    # ranks see signals and clocks at different moments: they agree before acting
                    stop, overdue, last = self.ctx.any(preemption.requested, overdue, self.length.finished(step))
                    if step % t.log_every == 0 or last:
                        record = self.log_record(grad_norm)
                        self.last_train_loss = record.get("loss")
                        self.emit(record)
                        self.display.log(step, record)
                    if (t.eval_every and step % t.eval_every == 0) or last:
                        self.display.evaluating(step)
                        # a bound's yardstick costs eval_draws validations: the last evaluation alone reports it
                        fixed = fixed_batches if last or self.objective.measure.every_evaluation else ()
                        self.state.last_val = with_bits_per_byte(
                            self.evaluate(val_batches, fixed), val_sizes, self.objective.measure
                        )
                        self.emit({"step": step, **self.work.record(), **self.state.last_val})
                        self.display.evaluation(step, self.state.last_val)
                        self.say_what_held_out_shows(step)
                        if self.best is not None:  # before the checkpoint of this step, which records the best
                            self.state.best = self.best.consider(self.state.best, step, self.state.last_val)
                    if curve_due(self.curves, step, last):  # after validation, before the checkpoint of this step
                        self.display.evaluating(step, "downstream curves")
                        point = take_curve_point(self.curves, self.model, self.objective, self.device)
                        self.emit({"step": step, **self.work.record(), **point})
                    if (t.ckpt_every and step % t.ckpt_every == 0) or last or overdue or stop:
                        self.save()
                        last_save = time.perf_counter()
                    if stop:
                        return "preempted"
                    if last:
                        break
                    self.step_clock = time.perf_counter()
        finally:
            self.display.close()
            for sink in self.sinks:
                sink.close()
        return "completed"

    def say_what_held_out_shows(self, step: int) -> None:
        """The held-out loss's warnings at this evaluation (lmpt.train.evaluation), said by rank 0."""
        if self.watch is not None:
            nats = self.objective.measure.held_out_nats(self.state.last_val)
            self.watch.say(step, nats, self.last_train_loss, self.ctx.is_main)

    def emit(self, record: dict) -> None:
        """A logged step or evaluation: metrics.jsonl, then any TensorBoard / W&B sink (rank 0 only)."""
        if self.ctx.is_main:
            self.metrics.write(record)
            for sink in self.sinks:
                sink.write(record)
