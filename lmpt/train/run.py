"""`lmpt` with a resolved RunSpec: the flow from text to a trained, checkpointed model, step by step. The CLI
(lmpt.cli) resolves the config, opens the session, calls `run_training`, then scores the downstream tasks."""

from __future__ import annotations

import math
import shutil
from dataclasses import dataclass
from pathlib import Path

import torch

from lmpt.console import console, info, warn
from lmpt.quality.stage import QualityStage
from lmpt.rundir import directory as rundir
from lmpt.train import batches as stream
from lmpt.train.best import BestKeeper
from lmpt.train.budget import run_length
from lmpt.train.display import make_display
from lmpt.train.distributed import agree_on_run_dir, full_model_state, parallelize
from lmpt.train.epochs import report_exposure, run_exposure
from lmpt.train.init_from import check_tokenizer, load_origin, stage_record
from lmpt.train.inputs import InputsCheck, fresh_model, prepare_inputs, sample_windows
from lmpt.train.loop import CurveScorer, Recorders, StepParts, TrainLoop
from lmpt.train.metrics import MetricsLog
from lmpt.train.optim import build_optimizer, build_scheduler
from lmpt.train.placement import place_job
from lmpt.train.plan import print_plan
from lmpt.train.preemption import stop_for_requeue
from lmpt.train.session import Session
from lmpt.train.spec import RunSpec
from lmpt.train.summary import print_sample, print_summary


@dataclass(frozen=True)
class TrainResult:
    """How a launch ended, for the CLI: "completed" (final model written), "dry run" or, on a rank other than 0,
    "preempted" (rank 0 exits with the requeue code instead of returning)."""

    status: str
    run_path: Path | None
    step: int
    wall_s: float
    """The run's wall time over every launch: each launch's training loop from start to end, evaluations and
    checkpoints included (lmpt.train.loop.TrainLoop.wall_seconds; earlier launches' carried by the checkpoint)."""
    val_loss: float
    device: str
    """The device type trained on (downstream scoring uses the same)."""
    train_s: float = 0.0
    """The run's training seconds over every launch: its optimizer steps alone, data waits included (the checkpoint
    carries them: lmpt.train.work.Work.seconds). Part of wall_s, so never more than it."""
    epochs: float | None = None
    """The passes over the training text the run's length makes (lmpt.train.epochs), recorded in status.json."""
    val_bpb: float = float("nan")
    """Bits per byte of the held-out windows at the last evaluation (lmpt.train.metrics.with_bits_per_byte)."""


def finite_or_none(value: float) -> float | None:
    """`value`, or None (JSON null) where it is NaN or infinite: status.json stays strict JSON."""
    return value if math.isfinite(value) else None


def run_training(
    spec: RunSpec,
    session: Session,
    quality: QualityStage | None = None,
    curves: CurveScorer | None = None,
    check: InputsCheck | None = None,
) -> TrainResult:
    """Train as `spec` says, on text that passed `quality` (lmpt.quality: dedup, filters, decontamination), once
    `check` has passed on the run's tokenizer and objective (before any model is built), taking
    `curves`' points every `curves.every` steps (downstream.score_every: built by lmpt.downstream.curves). On rank 0
    a completed run has its final model and summary written, and its status is left to the caller (after downstream
    scoring); a stopped run exits with the requeue code."""
    t, ctx = spec.trainer, session.ctx
    device, precision, threads = place_job(t, ctx)
    if t.dry_run:
        if ctx.is_main:
            print_plan(spec, precision)
            rundir.discard_if_fresh(session.hydra_dir)
        return TrainResult("dry run", None, 0, 0.0, float("nan"), device.type)
    run_path = agree_on_run_dir(ctx, session.hydra_dir)
    if run_path != session.hydra_dir:  # a rank other than 0: its placeholder directory is not the run's
        shutil.rmtree(session.hydra_dir, ignore_errors=True)
    run = rundir.claim_run(t, run_path, spec.config, ctx)
    if ctx.is_main:
        MetricsLog(run.path / rundir.METRICS_FILE).repair()  # a torn last record dropped; a foreign file refused

    run_tokenizer = rundir.load_run_tokenizer(run)
    data, objective = ctx.main_first(  # rank 0 builds caches, the others reuse them
        lambda: prepare_inputs(spec, run_tokenizer, quality, run.path if ctx.is_main else None, check)
    )
    tokenizer, origin = data.tokenizer, spec.origin
    if origin is not None:
        check_tokenizer(origin, tokenizer)
    windows = sample_windows(data, objective, t, ctx)

    model, model_vocab = fresh_model(objective, spec.model, tokenizer, t.seed)
    if origin is not None and run.resume_from is None:  # a resumed stage takes its weights from the checkpoint
        load_origin(model, origin)
    model = model.to(device)
    if ctx.is_main:  # once the weights fit: a refused run leaves nothing behind
        rundir.write_run_config(run, spec.config)
        rundir.save_run_tokenizer(run, tokenizer)
    forward = parallelize(model, ctx, device, t.strategy, precision.name)
    if t.compile:
        model.compile_parts()
    optimizer = build_optimizer(spec.optimizer, model, device)
    sources = [(s.name, s.weight, s.train[1] - s.train[0]) for s in data.sources]
    length, *_ = run_length(
        t,
        model,
        objective,
        ctx.world_size,
        device,
        precision.dtype or torch.float32,
        sum(tokens for *_, tokens in sources),
    )
    if length.rounding and ctx.is_main:
        warn(length.rounding)
    scheduler = build_scheduler(spec.scheduler, optimizer, length.max_steps, length.position)
    keeps_best = t.keep_best and t.eval_every > 0  # with eval_every=0 the one evaluation is the last step's
    best = BestKeeper(run.path, model, t.strategy, objective.arch, model_vocab, ctx) if keeps_best else None
    recorders = Recorders(
        run.checkpoint_store(t.keep_last),
        MetricsLog(run.path / rundir.METRICS_FILE),
        make_display(t.progress, length.max_steps, length),
        best,
        curves,
    )
    parts = StepParts(model, objective, optimizer, scheduler, precision, forward)
    loop = TrainLoop(t, spec.record, parts, recorders, ctx, length)
    if ctx.is_main:
        loop.store.remove_leftovers()
    if run.resume_from is not None:
        loop.restore(run.resume_from)
        info(f"resuming [bold]{run.path}[/] from {run.resume_from.name} (step {loop.state.step})")
    else:
        loop.start_fresh()
        if origin is not None and ctx.is_main:
            loop.metrics.write(stage_record(origin, spec.model.stage))
            info(f"stage {spec.model.stage}: starting from {origin.kind} weights in [bold]{origin.path}[/]")
    info(
        f"{objective.name} on {'an' if objective.arch[0] == 'e' else 'a'} {objective.arch} "
        f"({model.num_parameters() / 1e6:.2f}M parameters), {precision.name} on {device}"
        f"{f' x {ctx.world_size} processes' if ctx.enabled else ''} with {threads.describe()}"
        f", run directory [bold]{run.path}[/]"
        + (
            f"; no MFU: {precision.name} is emulated on this CPU"
            if precision.emulated
            else f"; MFU against the {loop.peak_source} ({loop.peak_flops / 1e9:,.0f} GFLOP/s)"
        )
    )
    exposure = run_exposure(t, spec.data.seq_len, objective, ctx.world_size, length.max_steps, sources)
    report_exposure(exposure)
    if length.budget is not None:
        info(f"budget: {length.budget.describe()}, about {length.max_steps:,} steps")

    objective.plan_run(length.max_steps)  # before the loader's workers copy it: schedules read step / max_steps
    steps = stream.StepBatches(windows.train, objective, loop.state.step, length.loader_steps)
    with rundir.failure_recorded(run.path if ctx.is_main else None, lambda: loop.state.step):
        status = loop.run(
            stream.step_loader(steps, spec.data.num_workers, device),
            stream.validation_batches(windows.val, objective, t.seed, windows.n_val),
            stream.yardstick_batches(windows.val, objective, windows.n_val),
        )
    wall = loop.wall_seconds()
    final_state = full_model_state(model, t.strategy) if status == "completed" else None  # collective
    val_loss, val_bpb = (float(loop.state.last_val.get(key, float("nan"))) for key in ("val_loss", "val_bpb"))
    train_s = round(loop.work.seconds, 3)
    result = TrainResult(
        status,
        run.path,
        loop.state.step,
        round(wall, 3),
        val_loss,
        device.type,
        train_s,
        round(exposure.epochs(), 4),
        val_bpb,
    )
    if not ctx.is_main:
        if status == "preempted":
            ctx.leave()  # rank 0 hands over to the scheduler without a closing barrier: so do the others
        return result
    if status == "preempted":
        stop_for_requeue(loop.preemption, run.path, loop.state.step, result.wall_s, ctx.world_size, train_s=train_s)
    assert final_state is not None, "a completed run has its final weights"
    with rundir.failure_recorded(run.path, lambda: loop.state.step):  # "completed" is never written without it
        rundir.save_final_model(run.path, final_state, objective.arch, model_vocab)
    print_summary(loop, run.path, result.wall_s, model)
    if objective.continues_text and t.sample_tokens > 0:
        if t.strategy == "fsdp":  # rank 0 alone cannot run a sharded model: sample from the consolidated one
            model = objective.build_model(spec.model, model_vocab)
            model.load_state_dict(final_state)
        print_sample(model, tokenizer, data.val, t.sample_tokens, t.seed)
    return result


def complete_run(result: TrainResult, downstream_s: float = 0.0) -> None:
    """The last word of a completed run (after its downstream scores, which took `downstream_s`): status.json says
    so, with the run's wall_s and train_s over every launch (train_s <= wall_s: see TrainResult), the scoring time,
    the epochs over the training text, and the last evaluation's val_loss and val_bpb (held-out bits per byte)."""
    assert result.run_path is not None, "rank 0 completes the run, and it knows the run directory"
    times = {"wall_s": result.wall_s, "train_s": result.train_s, "downstream_s": round(downstream_s, 3)}
    held_out = {"val_loss": finite_or_none(result.val_loss), "val_bpb": finite_or_none(result.val_bpb)}
    rundir.write_status(result.run_path, result.status, step=result.step, epochs=result.epochs, **times, **held_out)
    console.print(f"run directory: [bold]{result.run_path}[/]")
