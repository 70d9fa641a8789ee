"""Schema of `optimizer=muon`: Muon on the hidden matrices and AdamW on everything else, one group's settings
(kept apart from schema.py, which holds the other groups)."""

from __future__ import annotations

from dataclasses import dataclass, field

from lmpt.config.schema import OptimizerConfig


@dataclass
class MuonConfig(OptimizerConfig):
    name: str = "muon"
    lr: float = 0.04
    """Muon's peak learning rate, for the 2-D matrices inside the blocks (attention and MLP projections). This,
    momentum 0.9 and adamw_lr 2e-2 were tuned on the default run (the tiny model, ~400k tokens; docs/benchmarks.md):
    sweep them for bigger models and longer runs."""
    weight_decay: float = 0.0
    """Muon's decoupled weight decay (scaled by its learning rate, as torch.optim.Muon applies it)."""
    momentum: float = 0.9
    """Muon's momentum."""
    nesterov: bool = True
    """Nesterov momentum in Muon."""
    ns_steps: int = 5
    """Newton-Schulz iterations that orthogonalise each Muon update."""
    adjust_lr_fn: str | None = "original"
    """How Muon scales its learning rate by matrix shape: original (Keller Jordan's sqrt(max(1, rows/cols))) or
    match_rms_adamw (Moonshot's 0.2 sqrt(max(rows, cols)): AdamW's learning rate and decay then carry over)."""
    adamw_lr: float = 2e-2
    """AdamW's peak learning rate, for embeddings, the output head, norms, biases and the t5 lm_head / nsp head."""
    adamw_betas: list[float] = field(default_factory=lambda: [0.9, 0.95])
    """AdamW's (beta1, beta2)."""
    adamw_eps: float = 1e-8
    """AdamW's epsilon."""
    adamw_weight_decay: float = 0.0
    """AdamW's decoupled weight decay (never applied to norms, biases or embeddings)."""
