"""`trainer.dry_run=true`: what a run would do — config, size, tokens, FLOPs and time — without doing it."""

from __future__ import annotations

import torch
from omegaconf import DictConfig, OmegaConf
from rich.table import Table
from rich.tree import Tree

from lmpt.console import console
from lmpt.model.build import padded_vocab_size
from lmpt.objectives.registry import PlannedTokenizer, build_objective
from lmpt.tokenizer.load import load_tokenizer
from lmpt.tokenizer.special import SpecialTokens
from lmpt.train.budget import plan_length
from lmpt.train.efficiency import ASSUMED_MFU, expected_step_cost, peak_flops
from lmpt.train.precision import Precision


def config_tree(cfg: DictConfig) -> Tree:
    tree = Tree("[bold]config")
    for group, node in OmegaConf.to_container(cfg, resolve=True).items():
        branch = tree.add(f"[bold cyan]{group}")
        for key, value in node.items():
            branch.add(f"{key}: [green]{value}")
    return tree


def _planned_tokenizer(cfg: DictConfig):
    if cfg.tokenizer.backend == "hf":
        return load_tokenizer(cfg.tokenizer.path, "tokenizer.path", cfg.tokenizer.num_sentinels)
    if cfg.tokenizer.model_file:
        return load_tokenizer(cfg.tokenizer.model_file)
    return PlannedTokenizer(SpecialTokens(num_sentinels=cfg.tokenizer.num_sentinels), cfg.tokenizer.vocab_size)


def print_plan(cfg: DictConfig, precision: Precision) -> None:
    t = cfg.trainer
    tokenizer = _planned_tokenizer(cfg)
    objective = build_objective(cfg.objective, tokenizer, cfg.data.seq_len, cfg.model.arch)
    with torch.device("meta"):  # sized, never allocated
        model = objective.build_model(cfg.model, padded_vocab_size(tokenizer.vocab_size))
    examples_per_step = t.batch_size * t.grad_accum
    tokens_per_example = cfg.data.seq_len + objective.target_length
    peak, source = peak_flops(precision.device, precision.dtype or torch.float32)
    cost = expected_step_cost(model, objective, examples_per_step, peak)
    length = plan_length(t.budget, t.max_steps, cost)
    steps = length.max_steps
    flops, seconds = cost.flops * steps, cost.seconds * steps

    console.print(config_tree(cfg))
    table = Table(title="plan (dry run: nothing trained)", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    rows = {
        "objective / architecture": f"{objective.name} / {objective.arch}",
        "parameters": f"{model.num_parameters():,} ({model.num_parameters(non_embedding=True):,} non-embedding)",
        "tokens per step": f"{examples_per_step * tokens_per_example:,} ({examples_per_step} x {tokens_per_example})",
        "budget": length.budget.describe() if length.budget else "none (trainer.max_steps)",
        "max_steps": f"{steps:,}" + (" (derived: the budget over the expected cost per step)" if length.budget else ""),
        "total tokens": f"{examples_per_step * tokens_per_example * steps:,} over {steps:,} steps",
        "training FLOPs": f"{flops:.3e} ({cost.flops:.3e} per step, the head on the expected "
        f"{objective.expected_loss_fraction:.0%} of positions that carry loss)",
        **_flops_by_network(model, cfg.data.seq_len, objective.expected_loss_fraction),
        "estimated time": f"{seconds / 3600:.2f} h ({seconds:,.0f} s) at {ASSUMED_MFU:.0%} MFU of the {source} "
        f"({peak / 1e12:.2f} TFLOP/s), {precision.name} on {precision.device}",
    }
    for key, value in rows.items():
        table.add_row(key, value)
    console.print(table)


def _flops_by_network(model, seq_len: int, head_fraction: float) -> dict[str, str]:
    """The plan's row splitting the FLOPs of a model made of several networks (electra), else none."""
    if not hasattr(model, "flops_parts"):
        return {}
    parts = model.flops_parts(seq_len, head_fraction)
    total = sum(parts.values())
    return {"training FLOPs by network": " · ".join(f"{k} {v / total:.1%}" for k, v in parts.items())}
