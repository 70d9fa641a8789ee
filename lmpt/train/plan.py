"""`trainer.dry_run=true`: what a run would do — config, size, tokens, FLOPs and time — without doing it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf
from rich.table import Table
from rich.tree import Tree

from lmpt.config.budget import Budget
from lmpt.config.quality_schema import QualityConfig
from lmpt.config.schema import DataConfig, TokenizerConfig, settings
from lmpt.config.validate import parse_max_tokens
from lmpt.console import print_whole, warn
from lmpt.data.cache import cached_train_tokens, default_cache_root
from lmpt.errors import LmptError
from lmpt.model.build import padded_vocab_size
from lmpt.objectives.base import Objective
from lmpt.objectives.registry import PlannedTokenizer, build_objective
from lmpt.tokenizer.load import load_tokenizer
from lmpt.tokenizer.special import SpecialTokens
from lmpt.train.budget import RunLength, run_length
from lmpt.train.epochs import run_exposure
from lmpt.train.metrics import ASSUMED_MFU, StepCost
from lmpt.train.precision import Precision
from lmpt.train.spec import RunSpec


def config_tree(cfg: DictConfig) -> Tree:
    tree = Tree("[bold]config")
    container = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    assert isinstance(container, dict)
    for group, node in container.items():
        branch = tree.add(f"[bold cyan]{group!s}")
        for key, value in node.items():
            branch.add(f"{key}: [green]{value}")
    return tree


def _planned_tokenizer(tok: Any):
    """The configured tokenizer where it is a file already, else a stand-in of its size and reserved roles."""
    if tok.backend == "hf":
        return load_tokenizer(tok.path, "tokenizer.path", tok.num_sentinels)
    if tok.model_file:
        return load_tokenizer(tok.model_file)
    return PlannedTokenizer(SpecialTokens(num_sentinels=tok.num_sentinels), tok.vocab_size)


def sized_run(
    spec: RunSpec, device: torch.device, dtype: torch.dtype
) -> tuple[Any, Any, RunLength, StepCost, float, str]:
    """What `spec` would train, sized without training anything or allocating the model (built on the meta device):
    the objective, the model, the run's length, the expected cost of a step, the peak (FLOP/s) and what it is."""
    budget = spec.budget
    planned = _planned_sources(spec) if budget is not None and budget.unit == "epochs" else (None, False)
    return _sized(spec, device, dtype, _epoch_tokens(planned))


def _sized(
    spec: RunSpec, device: torch.device, dtype: torch.dtype, train_tokens: int | None
) -> tuple[Any, Any, RunLength, StepCost, float, str]:
    """sized_run, given the training text's token count a budget in epochs is measured against (None: unknown)."""
    tokenizer = _planned_tokenizer(spec.tokenizer)
    objective = build_objective(spec.objective, tokenizer, spec.data.seq_len, spec.model.arch)
    with torch.device("meta"):
        model = objective.build_model(spec.model, padded_vocab_size(tokenizer.vocab_size))
    length, cost, peak, source = run_length(spec.trainer, model, objective, 1, device, dtype, train_tokens)
    return objective, model, length, cost, peak, source


@dataclass(frozen=True)
class RunEstimate:
    """What a run would cost, planned: its steps, tokens, training FLOPs, time at ASSUMED_MFU of the device's peak,
    and its epochs over the training text (in words: unknown until the text is tokenised)."""

    steps: int
    tokens: float
    flops: float
    seconds: float
    epochs: float | None
    """None while the training text is not tokenised (and data.unique_tokens not given)."""
    at_least: bool = False
    """True when `epochs` is a floor: the text is not tokenised yet and data.max_tokens caps it from above."""


def estimate_run(spec: RunSpec, device: torch.device, dtype: torch.dtype) -> RunEstimate:
    """The dry-run plan's figures for `spec` on `device`, nothing built but on the meta device."""
    planned = _planned_sources(spec)  # once: a Hub corpus resolves its revision to read its cache
    budget = spec.budget
    tokens = _epoch_tokens(planned) if budget is not None and budget.unit == "epochs" else None
    objective, _, length, cost, _, _ = _sized(spec, device, dtype, tokens)
    steps = length.max_steps
    sources, at_least = planned
    epochs = None
    if sources is not None:
        epochs = run_exposure(spec.trainer, spec.data.seq_len, objective, 1, steps, sources).epochs()
    return RunEstimate(steps, cost.tokens * steps, cost.flops * steps, cost.seconds * steps, epochs, at_least)


def _planned_sources(spec: RunSpec) -> tuple[list[tuple[str, float, int]] | None, bool]:
    """The training text's sources a plan counts against, and whether their tokens are only a ceiling: a warm
    cache's; else data.unique_tokens (the run reads exactly its first N tokens); else data.max_tokens, which caps
    the text from above; else None."""
    sources, _ = _train_sources(spec)
    if sources is None and spec.data.unique_tokens:
        return [("", 1.0, spec.data.unique_tokens)], False
    cap = parse_max_tokens(spec.data.max_tokens)
    if sources is None and cap:
        return [("", 1.0, cap)], True
    return sources, False


def _epoch_tokens(planned: tuple[list[tuple[str, float, int]] | None, bool]) -> int | None:
    """The token count a budget in epochs is measured against: the planned sources' total, None while it is unknown
    or only a ceiling (data.max_tokens before the text is tokenised)."""
    sources, ceiling = planned
    return None if sources is None or ceiling else sum(tokens for *_, tokens in sources)


def _train_sources(spec: RunSpec) -> tuple[list[tuple[str, float, int]] | None, str]:
    """(name, weight, training tokens) of each source from a warm token cache (a dry run tokenises nothing), the
    first data.unique_tokens only where it is set; or None and why they are unknown."""
    if settings(spec.quality, QualityConfig).active:
        return None, "the quality stage decides the training text (a launch reports it)"
    try:
        data = settings(spec.data, DataConfig)
        sources = cached_train_tokens(
            data, settings(spec.tokenizer, TokenizerConfig), Path.cwd(), default_cache_root(data.cache_dir)
        )
    except LmptError as exc:
        return None, str(exc)
    if sources is None:
        return None, "the text is not tokenised yet (a launch reports it; later dry runs show it here)"
    if data.unique_tokens is not None and len(sources) == 1:  # the run reads the first N tokens only
        ((name, weight, tokens),) = sources
        sources = [(name, weight, min(tokens, data.unique_tokens))]
    return sources, ""


def print_plan(spec: RunSpec, precision: Precision) -> None:
    t, seq_len = spec.trainer, spec.data.seq_len
    dtype = precision.dtype or torch.float32
    objective, model, length, cost, peak, source = sized_run(spec, precision.device, dtype)
    examples_per_step = t.batch_size * t.grad_accum
    tokens_per_example = seq_len + objective.target_length
    steps = length.max_steps
    flops, seconds = cost.flops * steps, cost.seconds * steps
    epochs, repeats = _epochs(spec, objective, steps)
    budget = spec.budget

    print_whole(config_tree(spec.config))
    table = Table(title="plan (dry run: nothing trained)", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    rows = {
        "objective / architecture": f"{objective.name} / {objective.arch}",
        "parameters": f"{model.num_parameters():,} ({model.num_parameters(non_embedding=True):,} non-embedding)",
        "tokens per step": f"{examples_per_step * tokens_per_example:,} ({examples_per_step} x {tokens_per_example})",
        "budget": budget.describe() if budget else "none (trainer.max_steps)",
        "max_steps": f"{steps:,}" + (f" (derived: {_derivation(budget)})" if budget else ""),
        "total tokens": f"{examples_per_step * tokens_per_example * steps:,} over {steps:,} steps",
        "epochs": epochs,
        "training FLOPs": f"{flops:.3e} ({cost.flops:.3e} per step, the head on the expected "
        f"{objective.expected_loss_fraction:.0%} of positions that carry loss)",
        **_flops_by_network(model, seq_len, objective.expected_loss_fraction),
        "estimated time": f"{seconds / 3600:.2f} h ({seconds:,.0f} s) at {ASSUMED_MFU:.0%} MFU of the {source} "
        f"({peak / 1e12:.2f} TFLOP/s), {precision.name} on {precision.device}",
    }
    for key, value in rows.items():
        table.add_row(key, value)
    print_whole(table)
    for warning in (length.rounding, repeats):
        if warning is not None:
            warn(warning)


def _epochs(spec: RunSpec, objective: Objective, steps: int) -> tuple[str, str | None]:
    """The plan's epochs row, from a warm token cache (a dry run tokenises nothing) or saying why it is unknown, and
    the warning past 4 epochs (lmpt.train.epochs)."""
    sources, why = _train_sources(spec)
    if sources is None:
        return f"unknown: {why}", None
    exposure = run_exposure(spec.trainer, spec.data.seq_len, objective, 1, steps, sources)
    return exposure.epochs_text(), exposure.warning()  # the tokens have rows of their own


def _derivation(budget: Budget) -> str:
    """How a budget became the plan's step count."""
    if budget.unit == "epochs":
        return "the passes over the training text's tokens, in steps of the batch"
    return "the budget over the expected cost per step"


def _flops_by_network(model, seq_len: int, head_fraction: float) -> dict[str, str]:
    """The plan's row splitting the FLOPs of a model made of several networks (electra), else none."""
    if not hasattr(model, "flops_parts"):
        return {}
    parts = model.flops_parts(seq_len, head_fraction)
    total = sum(parts.values())
    return {"training FLOPs by network": " · ".join(f"{k} {v / total:.1%}" for k, v in parts.items())}
