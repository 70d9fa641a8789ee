"""`lmpt` with a composed config: the flow from text to a trained, checkpointed model, step by step."""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

import torch
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from lmpt.config.resume import resume_command
from lmpt.config.validate import validate_config
from lmpt.console import console, info
from lmpt.data.cache import default_cache_root, prepare_corpora
from lmpt.data.sampling import training_sampler, validation_sets
from lmpt.downstream.after_training import check_downstream, score_downstream
from lmpt.errors import LmptError
from lmpt.model import build_model
from lmpt.model.build import padded_vocab_size
from lmpt.model.generate import sample
from lmpt.objectives.corpus_checks import check_splits
from lmpt.objectives.registry import build_objective, preflight_objective
from lmpt.quality.stage import quality_stage
from lmpt.rng import derive_seed, generator
from lmpt.safe_files import save_weights
from lmpt.tokenizer.tokenizer import Tokenizer
from lmpt.train.batches import StepBatches, step_loader, validation_batches, yardstick_batches
from lmpt.train.budget import plan_length, refuse_two_lengths
from lmpt.train.checkpoint import CheckpointStore
from lmpt.train.display import make_display, summary_table
from lmpt.train.distributed import (
    Distributed,
    agree_on_run_dir,
    full_model_state,
    init_distributed,
    parallelize,
    rank_device,
)
from lmpt.train.drift import refuse_drift
from lmpt.train.efficiency import expected_step_cost, peak_flops
from lmpt.train.init_from import Origin, adopt_origin, check_tokenizer, load_origin, read_origin, stage_record
from lmpt.train.loop import TrainLoop
from lmpt.train.metrics import MetricsLog
from lmpt.train.optim import build_optimizer, build_scheduler
from lmpt.train.placement import claim_free_gpu, release_gpus, sweeping_in_parallel
from lmpt.train.plan import print_plan
from lmpt.train.precision import pick_device, pick_precision
from lmpt.train.preemption import EXIT_PREEMPTED
from lmpt.train.rundir import (
    FINAL_MODEL,
    METRICS_FILE,
    check_run_config,
    discard_if_fresh,
    failure_recorded,
    load_run_tokenizer,
    locate_run,
    save_run_tokenizer,
    write_run_config,
    write_status,
)
from lmpt.train.runlock import lock_for_job, release_run_dirs
from lmpt.train.runlog import close_run_log, open_run_log


def run_training(cfg: DictConfig) -> float:
    """Train as configured; returns the final validation loss (what a sweeper would minimise)."""
    hydra_dir = Path(HydraConfig.get().runtime.output_dir)
    ctx = init_distributed(cfg.trainer.strategy)
    try:
        result = _train(cfg, hydra_dir, ctx)
    except (Exception, KeyboardInterrupt) as exc:
        close_run_log(exc)
        if isinstance(exc, LmptError) and ctx.is_main and HydraConfig.get().mode != RunMode.MULTIRUN:
            discard_if_fresh(hydra_dir)  # a sweep keeps the failed job's folder
        raise
    finally:
        close_run_log()
        release_gpus()
        release_run_dirs()
    ctx.close()
    return result


def _prepare(cfg: DictConfig, run_tokenizer: Tokenizer | None, record_in: Path | None = None):
    """Tokenizer, token cache and objective: refusals here come before any model is built. `run_tokenizer`:
    a resumed run's own tokenizer, used instead of the cached or configured one. `record_in`: where the
    quality stage's record (prepare/) is copied."""
    data_cfg, tokenizer_cfg = OmegaConf.to_object(cfg.data), OmegaConf.to_object(cfg.tokenizer)
    cache_root = default_cache_root(cfg.data.cache_dir)
    quality = quality_stage(OmegaConf.to_object(cfg.quality), cfg.downstream)
    data = prepare_corpora(data_cfg, tokenizer_cfg, Path.cwd(), cache_root, tokenizer=run_tokenizer, quality=quality)
    if quality is not None and record_in is not None:
        quality.copy_record(record_in)
    objective = build_objective(cfg.objective, data.tokenizer, cfg.data.seq_len, cfg.model.arch)
    check_splits(objective, data, data_cfg)
    longest = max(cfg.data.seq_len, objective.target_length)
    if longest > cfg.model.max_seq_len:
        raise LmptError(
            f"data.seq_len={cfg.data.seq_len} needs {longest} positions but model.max_seq_len="
            f"{cfg.model.max_seq_len}: lower data.seq_len or raise model.max_seq_len"
        )
    return data, objective


def _given_keys() -> set[str]:
    """The config keys set on the command line (not by conf/'s defaults)."""
    return {o.split("=", 1)[0].lstrip("+~") for o in HydraConfig.get().overrides.task}


def _adopt_origin(cfg: DictConfig) -> Origin | None:
    """model.init_from: read the source and take its architecture (keys not set on the command line)."""
    if not cfg.model.init_from:
        return None
    origin = read_origin(cfg.model.init_from)
    adopt_origin(cfg, origin, _given_keys())
    return origin


def _train(cfg: DictConfig, hydra_dir: Path, ctx: Distributed) -> float:
    t = cfg.trainer
    validate_config(cfg)
    check_downstream(cfg.downstream)
    refuse_two_lengths(t.max_steps, t.budget, _given_keys())
    device = rank_device(pick_device(t.device), ctx)
    if device.type == "cuda" and not ctx.enabled and sweeping_in_parallel():
        index = claim_free_gpu()  # jobs running side by side each take a GPU of their own
        if index is not None:
            device = torch.device("cuda", index)
            torch.cuda.set_device(device)
    precision = pick_precision(t, device)
    torch.use_deterministic_algorithms(t.deterministic, warn_only=False)
    origin = _adopt_origin(cfg)
    preflight_objective(cfg.objective, cfg.tokenizer, cfg.data.seq_len, cfg.model.arch)
    if t.dry_run:
        if ctx.is_main:
            print_plan(cfg, precision)
            discard_if_fresh(hydra_dir)
        return float("nan")
    run_path = agree_on_run_dir(ctx, hydra_dir)
    if run_path != hydra_dir:  # a rank other than 0: its placeholder directory is not the run's
        shutil.rmtree(hydra_dir, ignore_errors=True)
    run = locate_run(cfg, run_path, discard=ctx.is_main)
    lock_for_job(run.path, ctx)  # before anything is read from or written to the run directory
    check_run_config(run, cfg)
    if ctx.is_main:
        open_run_log(run.path)
        MetricsLog(run.path / METRICS_FILE).repair()  # a torn last record dropped; a foreign file refused
    if run.resume_from is not None:
        refuse_drift(run.resume_from, cfg)

    run_tokenizer = load_run_tokenizer(run)
    record_in = run.path if ctx.is_main else None
    data, objective = ctx.main_first(lambda: _prepare(cfg, run_tokenizer, record_in))  # rank 0 builds, others reuse
    tokenizer = data.tokenizer
    if origin is not None:
        check_tokenizer(origin, tokenizer)
    sampler = training_sampler(data, objective.window_length, t.batch_size, t.seed, ctx.rank, ctx.world_size,
                               t.grad_accum)  # fmt: skip
    n_val = t.eval_batches * ctx.world_size  # the same held-out windows whatever the world size, shared out
    val_windows = validation_sets(data, objective.window_length, t.batch_size, n_val)

    model_vocab = padded_vocab_size(tokenizer.vocab_size)
    torch.manual_seed(derive_seed(t.seed, "init"))  # the same initial weights on every rank
    model = objective.build_model(cfg.model, model_vocab)
    if origin is not None and run.resume_from is None:  # a resumed stage takes its weights from the checkpoint
        load_origin(model, origin)
    model = model.to(device)
    if ctx.is_main:  # once the weights fit: a refused run leaves nothing behind
        write_run_config(run, cfg)
        save_run_tokenizer(run, tokenizer)
    forward = parallelize(model, ctx, device, t.strategy, precision.name)
    if t.compile:
        model.compile_parts()
    optimizer = build_optimizer(cfg.optimizer, model, device)
    peak, _ = peak_flops(device, precision.dtype or torch.float32)
    cost = expected_step_cost(model, objective, t.batch_size * t.grad_accum * ctx.world_size, peak)
    length = plan_length(t.budget, t.max_steps, cost)
    scheduler = build_scheduler(cfg.scheduler, optimizer, length.max_steps, length.position)
    loop = TrainLoop(
        cfg, model, objective, optimizer, scheduler, precision,
        CheckpointStore(run.checkpoints, t.keep_last), MetricsLog(run.path / METRICS_FILE),
        make_display(t.progress, length.max_steps), forward=forward, ctx=ctx, length=length,
    )  # fmt: skip
    if ctx.is_main:
        loop.store.remove_leftovers()
    if run.resume_from is not None:
        loop.restore(run.resume_from)
        info(f"resuming [bold]{run.path}[/] from {run.resume_from.name} (step {loop.state.step})")
    else:
        torch.manual_seed(derive_seed(t.seed, "dropout", ctx.rank))
        if origin is not None and ctx.is_main:
            loop.metrics.write(stage_record(origin, cfg.model.stage))
            info(f"stage {cfg.model.stage}: starting from {origin.kind} weights in [bold]{origin.path}[/]")
    info(
        f"{objective.name} on {'an' if objective.arch[0] == 'e' else 'a'} {objective.arch} "
        f"({model.num_parameters() / 1e6:.2f}M parameters), {precision.name} on {device}"
        f"{f' x {ctx.world_size} processes' if ctx.enabled else ''}, run directory [bold]{run.path}[/]"
        + (
            f"; no MFU: {precision.name} is emulated on this CPU"
            if precision.emulated
            else f"; MFU against the {loop.peak_source} ({loop.peak_flops / 1e9:,.0f} GFLOP/s)"
        )
    )
    if length.budget is not None:
        info(f"budget: {length.budget.describe()}, about {length.max_steps:,} steps")

    started = time.perf_counter()
    batches = StepBatches(sampler, objective, t.seed, ctx.rank, t.grad_accum, loop.state.step, length.loader_steps)
    with failure_recorded(run.path if ctx.is_main else None, lambda: loop.state.step):
        status = loop.run(
            step_loader(batches, cfg.data.num_workers, device),
            validation_batches(val_windows, objective, t.seed, n_val),
            yardstick_batches(val_windows, objective, n_val),
        )
    wall = time.perf_counter() - started
    final_state = full_model_state(model, t.strategy) if status == "completed" else None  # collective
    if not ctx.is_main:
        if status == "preempted":
            ctx.leave()  # rank 0 hands over to the scheduler without a closing barrier: so do the others
        return float(loop.state.last_val.get("val_loss", float("nan")))
    if status == "completed":  # the final model first: "completed" is never written without it
        with failure_recorded(run.path, lambda: loop.state.step):
            metadata = {"arch": objective.arch, "vocab_size": str(model_vocab)}
            save_weights(run.path / FINAL_MODEL, final_state, metadata)
        with failure_recorded(run.path, lambda: loop.state.step):  # the tasks named in the downstream group
            score_downstream(cfg.downstream, run.path, loop.state.step, loop.metrics, device.type)
    write_status(run.path, status, step=loop.state.step, wall_s=round(wall, 3))
    if status == "preempted":
        console.print(f"stopped at step {loop.state.step} with a committed checkpoint")
        loop.preemption.hand_over()  # under submitit: its handler requeues the job and exits
        console.print(f"to resume: {resume_command(run.path, ctx.world_size)} (exit code {EXIT_PREEMPTED})")
        sys.exit(EXIT_PREEMPTED)

    _print_summary(loop, run.path, wall, model)
    if objective.arch == "decoder" and t.sample_tokens > 0:
        if t.strategy == "fsdp":  # rank 0 alone cannot run a sharded model: sample from the consolidated one
            model = build_model(cfg.model, objective.arch, model_vocab, tokenizer.special.pad)
            model.load_state_dict(final_state)
        _print_sample(model, tokenizer, data.val, t, device)
    console.print(f"run directory: [bold]{run.path}[/]")
    return float(loop.state.last_val.get("val_loss", float("nan")))


def _print_summary(loop: TrainLoop, run_path: Path, wall: float, model) -> None:
    records = [r for r in loop.metrics.records() if "loss" in r]
    first, last = (records[0], records[-1]) if records else ({}, {})
    val = loop.state.last_val
    rows = {
        "steps": str(loop.state.step),
        "parameters": f"{model.num_parameters() / 1e6:.2f}M",
        "train loss": f"{first.get('loss', float('nan')):.4f} -> {last.get('loss', float('nan')):.4f}",
        "val loss / ppl": f"{val.get('val_loss', float('nan')):.4f} / {val.get('val_ppl', float('nan')):.2f}",
        **(
            {"val loss at the fixed rate": f"{val['val_fixed_loss']:.4f} (objective.eval_mask_prob)"}
            if "val_fixed_loss" in val
            else {}
        ),
        "tokens seen / loss-bearing": f"{loop.work.tokens:,} / {loop.work.loss_tokens:,}",
        "training FLOPs": f"{loop.work.flops:.3e}",
        "wall time": f"{wall:.1f}s",
        "run directory": str(run_path),
    }
    console.print(summary_table(rows))


def _print_sample(model, tokenizer, val_corpus, t, device) -> None:
    """A continuation of the first held-out document's opening; each document it starts is a new line."""
    start, end = val_corpus.doc_span(0)
    prompt = [int(i) for i in val_corpus.window(start, min(8, end - start))]
    new = sample(model, prompt, t.sample_tokens, generator=generator(t.seed, "sample"), vocab_size=tokenizer.vocab_size)
    ids = prompt + new
    documents, current = [], []
    for token in ids:  # decode each document whole so pieces keep their leading spaces
        if token == tokenizer.special.eos:
            documents.append(tokenizer.decode(current))
            current = []
        else:
            current.append(token)
    text = "\n".join([*documents, tokenizer.decode(current)])
    head = tokenizer.decode(prompt)
    console.print(f"[bold]sample:[/] [cyan]{head}[/]{text[len(head) :]}")
