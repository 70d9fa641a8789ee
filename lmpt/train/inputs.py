"""What a run trains on, made before any model is built (so refusals here cost nothing): the tokenizer and token
cache, the objective, and the training and held-out windows."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import torch

from lmpt.config.schema import DataConfig, ModelConfig, TokenizerConfig, TrainerConfig, settings
from lmpt.data.cache import PreparedData, default_cache_root, prepare_corpora
from lmpt.data.sampler import StepLayout, StepSamples, ValidationWindows
from lmpt.data.sampling import hold_unique_tokens, training_sampler, validation_sets
from lmpt.data.small_text import say_all
from lmpt.errors import LmptError, SmallTextError
from lmpt.model import LanguageModel
from lmpt.model.build import padded_vocab_size
from lmpt.objectives.base import Objective
from lmpt.objectives.checks import check_splits
from lmpt.objectives.registry import build_objective
from lmpt.quality.stage import QualityStage
from lmpt.rng import derive_seed
from lmpt.rundir import directory as rundir
from lmpt.rundir.text import text_at, write_run_text
from lmpt.tokenizer.base import Tokenizer
from lmpt.train.distributed import Distributed
from lmpt.train.init_from import check_tokenizer, load_origin
from lmpt.train.spec import RunSpec

InputsCheck = Callable[[Tokenizer, Objective], None]
"""A check of what the run will do after training against its tokenizer and objective, once they exist (the CLI's
lmpt.downstream.run_tasks.check_downstream_fits): it raises LmptError before any model is built."""


def prepare_inputs(
    spec: RunSpec,
    run_tokenizer: Tokenizer | None,
    quality: QualityStage | None,
    record_in: Path | None,
    check: InputsCheck | None = None,
    launch_dir: Path | None = None,
) -> tuple[PreparedData, Objective]:
    """Tokenizer, token cache and objective. `run_tokenizer`: a resumed run's own tokenizer, used instead of the
    cached or configured one; `quality`: the stage the text passes first, its record copied into `record_in`;
    `check`: run on the tokenizer and objective before they are returned; `launch_dir`: where relative data paths
    start (a resumed run's recorded folder; None: the working directory)."""
    data_cfg, model_cfg = spec.data, spec.model
    data_settings = settings(data_cfg, DataConfig)
    cache_root = default_cache_root(data_cfg.cache_dir)
    data = prepare_corpora(
        data_settings,
        settings(spec.tokenizer, TokenizerConfig),
        launch_dir or Path.cwd(),
        cache_root,
        tokenizer=run_tokenizer,
        quality=quality,
    )
    if quality is not None and record_in is not None:
        quality.copy_record(record_in)
    data = hold_unique_tokens(data, data_cfg.unique_tokens)
    objective = build_objective(spec.objective, data.tokenizer, data_cfg.seq_len, model_cfg.arch)
    check_splits(objective, data, data_settings)
    longest = max(data_cfg.seq_len, objective.target_length)
    if longest > model_cfg.max_seq_len:
        raise LmptError(
            f"data.seq_len={data_cfg.seq_len} needs {longest} positions but model.max_seq_len="
            f"{model_cfg.max_seq_len}: lower data.seq_len or raise model.max_seq_len"
        )
    if check is not None:
        check(data.tokenizer, objective)
    return data, objective


@dataclass(frozen=True)
class RunWindows:
    train: StepSamples
    """This rank's training windows, a pure function of (seed, step, rank)."""
    val: dict[str, ValidationWindows]
    """The held-out windows by source: the same whatever the world size."""
    n_val: int
    """Held-out batches in all, shared out among the ranks."""


def sample_windows(data: PreparedData, objective: Objective, trainer: TrainerConfig, ctx: Distributed) -> RunWindows:
    layout = StepLayout(trainer.batch_size, ctx.rank, ctx.world_size, trainer.grad_accum)
    train = training_sampler(data, objective.window_length, layout, trainer.seed)
    n_val = trainer.eval_batches * ctx.world_size
    return RunWindows(train, validation_sets(data, objective.window_length, trainer.batch_size, n_val), n_val)


def fresh_model(objective: Objective, model_cfg: ModelConfig, tokenizer: Tokenizer, seed: int) -> tuple[Any, int]:
    """The objective's model, freshly initialised from `seed` (the same weights on every rank), and its padded
    vocabulary size."""
    vocab = padded_vocab_size(tokenizer.vocab_size)
    torch.manual_seed(derive_seed(seed, "init"))
    return objective.build_model(model_cfg, vocab), vocab


@dataclass(frozen=True)
class RunInputs:
    """What a launch trains: the prepared data (tokenizer and corpora), the objective, this rank's windows, and the
    model with its initial weights on the run's device and its padded vocabulary size."""

    data: PreparedData
    objective: Objective
    windows: RunWindows
    model: LanguageModel
    model_vocab: int

    def sampling_model(self, final_state: dict, strategy: str, model_cfg: ModelConfig) -> LanguageModel:
        """The model a finished run samples from: the trained one, or under FSDP (rank 0 alone cannot run a sharded
        model) a consolidated copy holding `final_state`, the full weights."""
        if strategy != "fsdp":
            return self.model
        model = cast(LanguageModel, self.objective.build_model(model_cfg, self.model_vocab))  # it continues text
        model.load_state_dict(final_state)
        return model


def run_inputs(
    spec: RunSpec,
    run: rundir.RunDir,
    ctx: Distributed,
    device: torch.device,
    quality: QualityStage | None,
    check: InputsCheck | None,
) -> RunInputs:
    """The inputs of a launch in `run`: rank 0 builds the caches and the others reuse them (a resumed run keeps its
    own tokenizer, and reads its own text: lmpt.rundir.text); model.init_from's tokenizer must be the run's; a new
    stage of model.init_from starts from its origin's weights. Once the weights fit, rank 0 writes the run's config,
    tokenizer and the record of its text: a refused run leaves nothing behind."""
    run_tokenizer = rundir.load_run_tokenizer(run)
    launch_dir = run.text.launch_dir if run.text is not None else None
    try:
        data, objective = ctx.main_first(
            lambda: prepare_inputs(spec, run_tokenizer, quality, run.path if ctx.is_main else None, check, launch_dir)
        )
        if spec.origin is not None:
            check_tokenizer(spec.origin, data.tokenizer)
        windows = sample_windows(data, objective, spec.trainer, ctx)
    except SmallTextError as first:  # every problem of a small text at once, with keys that train on it
        tokenizer = settings(spec.tokenizer, TokenizerConfig)
        raise say_all(settings(spec.data, DataConfig), tokenizer, launch_dir or Path.cwd(), first) from None
    model, model_vocab = fresh_model(objective, spec.model, data.tokenizer, spec.trainer.seed)
    if spec.origin is not None and run.resume_from is None:  # a resumed stage takes its weights from the checkpoint
        load_origin(model, spec.origin)
    model = model.to(device)
    if ctx.is_main:
        rundir.write_run_config(run, spec.config)
        rundir.save_run_tokenizer(run, data.tokenizer)
        write_run_text(run.path, run.text or text_at(settings(spec.data, DataConfig), Path.cwd()))
    return RunInputs(data, objective, windows, model, model_vocab)
