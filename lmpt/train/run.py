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
from lmpt.train.budget import run_length
from lmpt.train.display import make_display, print_sample, print_summary
from lmpt.train.distributed import Distributed, agree_on_run_dir, full_model_state, parallelize
from lmpt.train.epochs import Exposure, report_exposure, run_exposure
from lmpt.train.evaluation import BestKeeper, CurveScorer, HeldOutWatch
from lmpt.train.init_from import stage_record
from lmpt.train.inputs import InputsCheck, RunInputs, run_inputs
from lmpt.train.loop import Recorders, StepParts, TrainLoop
from lmpt.train.metrics import MetricsLog
from lmpt.train.optim import build_optimizer, build_scheduler
from lmpt.train.placement import Placement, place_job
from lmpt.train.plan import print_plan
from lmpt.train.preemption import stop_for_requeue
from lmpt.train.session import Session
from lmpt.train.spec import RunSpec
from lmpt.train.state import Checkpoints


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
    carries them: lmpt.train.metrics.Work.seconds). Part of wall_s, so never more than it."""
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
    `curves`' points every `curves.every` steps (downstream.score_every: built by lmpt.downstream.run_tasks). On rank 0
    a completed run has its final model and summary written, and its status is left to the caller (after downstream
    scoring); a stopped run exits with the requeue code."""
    t, ctx = spec.trainer, session.ctx
    placement = place_job(t, ctx, spec.model.d_model)
    device = placement.device
    if t.dry_run:
        if ctx.is_main:
            print_plan(spec, placement.precision)
            rundir.discard_if_fresh(session.hydra_dir)
        return TrainResult("dry run", None, 0, 0.0, float("nan"), device.type)
    run = _claim_run(spec, session)
    inputs = run_inputs(spec, run, ctx, device, quality, check)
    objective, windows, sources = inputs.objective, inputs.windows, inputs.data.source_tokens()
    loop = _training_loop(spec, ctx, run, inputs, placement, curves, sum(tokens for *_, tokens in sources))
    _start_or_resume(loop, spec, run, ctx.is_main)
    exposure = _announce(loop, spec, placement, run.path, sources)
    if loop.watch is not None:
        loop.watch.epochs_per_step = exposure.epochs() / max(exposure.steps, 1)

    objective.plan_run(loop.length.max_steps)  # before the loader's workers copy it: schedules read step / max_steps
    steps = stream.StepBatches(windows.train, objective, loop.state.step, loop.length.loader_steps)
    with rundir.failure_recorded(run.path if ctx.is_main else None, lambda: loop.state.step):
        status = loop.run(
            stream.step_loader(steps, spec.data.num_workers, device),
            stream.validation_batches(windows.val, objective, t.seed, windows.n_val),
            stream.yardstick_batches(windows.val, objective, windows.n_val),
        )
    wall_s, epochs = round(loop.wall_seconds(), 3), round(exposure.epochs(), 4)
    final_state = full_model_state(inputs.model, t.strategy) if status == "completed" else None  # collective
    val_loss, val_bpb = (float(loop.state.last_val.get(key, float("nan"))) for key in ("val_loss", "val_bpb"))
    train_s = round(loop.work.seconds, 3)
    result = TrainResult(status, run.path, loop.state.step, wall_s, val_loss, device.type, train_s, epochs, val_bpb)
    if not ctx.is_main:
        if status == "preempted":
            ctx.leave()  # rank 0 hands over to the scheduler without a closing barrier: so do the others
        return result
    if status == "preempted":
        stop_for_requeue(loop.preemption, run.path, loop.state.step, result.wall_s, ctx.world_size, train_s=train_s)
    assert final_state is not None, "a completed run has its final weights"
    _finish(loop, spec, result, final_state, inputs)
    return result


def _claim_run(spec: RunSpec, session: Session) -> rundir.RunDir:
    """The run's directory, agreed by every rank and claimed (a fresh one, or the one a resume continues in); rank
    0 repairs its metrics.jsonl (a torn last record dropped; a foreign file refused)."""
    ctx = session.ctx
    run_path = agree_on_run_dir(ctx, session.hydra_dir)
    if run_path != session.hydra_dir:  # a rank other than 0: its placeholder directory is not the run's
        shutil.rmtree(session.hydra_dir, ignore_errors=True)
    run = rundir.claim_run(spec.trainer, run_path, spec.config, spec.data, ctx)
    if ctx.is_main:
        MetricsLog(run.path / rundir.METRICS_FILE).repair()
    return run


def _training_loop(
    spec: RunSpec,
    ctx: Distributed,
    run: rundir.RunDir,
    inputs: RunInputs,
    placement: Placement,
    curves: CurveScorer | None,
    train_tokens: int,
) -> TrainLoop:
    """The loop over the inputs' model, parallelised and compiled as trainer asks, with its optimizer, its length
    (steps, or a budget over `train_tokens`) and schedule, and what it records into the run's directory."""
    t, model, objective, precision = spec.trainer, inputs.model, inputs.objective, placement.precision
    device = placement.device
    forward = parallelize(model, ctx, device, t.strategy, precision.name)
    if t.compile:
        model.compile_parts()
    optimizer = build_optimizer(spec.optimizer, model, device)
    length, *_ = run_length(t, model, objective, ctx.world_size, device, precision.dtype or torch.float32, train_tokens)
    if length.rounding and ctx.is_main:
        warn(length.rounding)
    scheduler = build_scheduler(spec.scheduler, optimizer, length.max_steps, length.position)
    keeps_best = t.keep_best and t.eval_every > 0  # with eval_every=0 the one evaluation is the last step's
    best = BestKeeper(run.path, model, t.strategy, objective.arch, inputs.model_vocab, ctx) if keeps_best else None
    recorders = Recorders(
        Checkpoints(run.checkpoint_store(t.keep_last), ctx, t.strategy == "fsdp"),
        MetricsLog(run.path / rundir.METRICS_FILE),
        make_display(t.progress, length.max_steps, length),
        best,
        curves,
        HeldOutWatch(objective.tokenizer.vocab_size),  # its epochs told once the run knows them
    )
    parts = StepParts(model, objective, optimizer, scheduler, precision, forward)
    loop = TrainLoop(t, spec.record, parts, recorders, ctx, length)
    if ctx.is_main:
        loop.checkpoints.store.remove_leftovers()
    return loop


def _start_or_resume(loop: TrainLoop, spec: RunSpec, run: rundir.RunDir, main: bool) -> None:
    """Resume from the run's last checkpoint, or start a fresh run (a new stage's first metrics record says where
    its weights came from)."""
    origin = spec.origin
    if run.resume_from is not None:
        loop.restore(run.resume_from)
        info(f"resuming [bold]{run.path}[/] from {run.resume_from.name} (step {loop.state.step})")
        return
    loop.start_fresh()
    if origin is not None and main:
        loop.metrics.write(stage_record(origin, spec.model.stage))
        info(f"stage {spec.model.stage}: starting from {origin.kind} weights in [bold]{origin.path}[/]")


def _announce(
    loop: TrainLoop, spec: RunSpec, placement: Placement, path: Path, sources: list[tuple[str, float, int]]
) -> Exposure:
    """The run's start line (objective, architecture and size, precision and device, threads, run directory and
    what MFU is measured against), then how much of its data it sees and its budget; returns the exposure."""
    ctx, objective, length, precision = loop.ctx, loop.objective, loop.length, placement.precision
    info(
        f"{objective.name} on {'an' if objective.arch[0] == 'e' else 'a'} {objective.arch} "
        f"({loop.model.num_parameters() / 1e6:.2f}M parameters), {precision.name}"
        f"{f' ({precision.why})' if precision.why else ''} on {placement.device}"
        f"{f' x {ctx.world_size} processes' if ctx.enabled else ''} with {placement.threads.describe()}"
        f", run directory [bold]{path}[/]"
        + (
            f"; no MFU: {precision.name} is emulated on this CPU"
            if precision.emulated
            else f"; MFU against the {loop.peak_source} ({loop.peak_flops / 1e9:,.0f} GFLOP/s)"
        )
    )
    exposure = run_exposure(spec.trainer, spec.data.seq_len, objective, ctx.world_size, length.max_steps, sources)
    report_exposure(exposure)
    if length.budget is not None:
        info(f"budget: {length.budget.describe()}, about {length.max_steps:,} steps")
    return exposure


def _finish(loop: TrainLoop, spec: RunSpec, result: TrainResult, final_state: dict, inputs: RunInputs) -> None:
    """Rank 0's end of a completed run: the final model written (never "completed" without it), the summary, and a
    sample of text when the objective continues text."""
    t, objective, run_path, model = spec.trainer, inputs.objective, result.run_path, inputs.model
    assert run_path is not None, "rank 0 finishes the run, and it knows the run directory"
    with rundir.failure_recorded(run_path, lambda: loop.state.step):  # "completed" is never written without it
        rundir.save_final_model(run_path, final_state, objective.arch, inputs.model_vocab)
    print_summary(loop.metrics, loop.state, loop.work, run_path, result.wall_s, model)
    if objective.continues_text and t.sample_tokens > 0:
        sampler = inputs.sampling_model(final_state, t.strategy, spec.model)
        print_sample(sampler, inputs.data.tokenizer, inputs.data.val, t.sample_tokens, t.seed)


def complete_run(result: TrainResult, downstream_s: float = 0.0) -> None:
    """The last word of a completed run (after its downstream scores, which took `downstream_s`): status.json says
    so, with the run's wall_s and train_s over every launch (train_s <= wall_s: see TrainResult), the scoring time,
    the epochs over the training text, and the last evaluation's val_loss and val_bpb (held-out bits per byte)."""
    assert result.run_path is not None, "rank 0 completes the run, and it knows the run directory"
    times = {"wall_s": result.wall_s, "train_s": result.train_s, "downstream_s": round(downstream_s, 3)}
    held_out = {"val_loss": finite_or_none(result.val_loss), "val_bpb": finite_or_none(result.val_bpb)}
    rundir.write_status(result.run_path, result.status, step=result.step, epochs=result.epochs, **times, **held_out)
    console.print(f"run directory: [bold]{result.run_path}[/]")
