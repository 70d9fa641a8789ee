"""Multi-token prediction modules after DeepSeek-V3 (arXiv 2412.19437, section 2.2).

Module k (k = 1..D) at position i takes the previous depth's hidden state h^{k-1}_i (k = 1: the main model's
final hidden state, after its final norm) and the embedding of token t_{i+k}, normalises both (RMSNorm),
concatenates them and projects back to d (M_k, a [d, 2d] matrix), runs one transformer block TRM_k, and scores
token t_{i+k+1} with the model's shared output head after its own final norm. The embedding and the head are the
main model's; the modules sit beside the body, so generation and export never see them."""

from __future__ import annotations

import math
from typing import cast

import torch
from torch import nn

from lmpt.batch import IGNORE
from lmpt.config.schema import ModelConfig
from lmpt.model.attention import Rope
from lmpt.model.block import Block
from lmpt.model.head import RowsLoss, token_losses


class MtpModule(nn.Module):
    """One depth: h' = TRM(M [RMSNorm(h); RMSNorm(emb)]); `norm` is applied before the shared head."""

    def __init__(self, cfg: ModelConfig, n_layers: int) -> None:
        super().__init__()
        d, eps = int(cfg.d_model), float(cfg.norm_eps)
        self.hidden_norm = nn.RMSNorm(d, eps=eps)
        self.embed_norm = nn.RMSNorm(d, eps=eps)
        self.proj = nn.Linear(2 * d, d, bias=False)
        self.block = Block(cfg, cross=False)
        self.norm = nn.RMSNorm(d, eps=eps)
        for name, module in self.named_modules():  # as the main stack (init_stack): residual outputs scaled
            if isinstance(module, nn.Linear):
                scaled = name.endswith((".o", ".down"))
                std = cfg.init_std / math.sqrt(2 * n_layers) if scaled else cfg.init_std
                nn.init.normal_(module.weight, mean=0.0, std=std)

    def forward(
        self, hidden: torch.Tensor, embedded: torch.Tensor, rope: Rope | None, mask: torch.Tensor | None, causal: bool
    ) -> torch.Tensor:
        """[B, S, d] previous depth's hidden states and [B, S, d] embeddings of the tokens k ahead -> h^k."""
        x = self.proj(torch.cat([self.hidden_norm(hidden), self.embed_norm(embedded)], dim=-1))
        return self.block(x, rope, mask, causal)


class MultiTokenPrediction(nn.Module):
    """D sequential modules. Depth k embeds the target of depth k-1 at each position (depth 0: the main labels):
    that is t_{i+k}. Where that target is IGNORE (past the window, padding, another document) the pad token is
    embedded instead; depth k's own target there is IGNORE too, since a later token is no nearer."""

    def __init__(self, cfg: ModelConfig, depth: int) -> None:
        super().__init__()
        self.depths = nn.ModuleList(MtpModule(cfg, int(cfg.n_layers)) for _ in range(depth))

    def __len__(self) -> int:
        return len(self.depths)

    def forward(
        self,
        hidden: torch.Tensor,
        labels: torch.Tensor,
        mtp_labels: torch.Tensor,
        embed: nn.Module,
        pad_id: int,
        rope: Rope | None,
        mask: torch.Tensor | None,
        causal: bool,
        head_weight: torch.Tensor,
        loss_of_rows: RowsLoss,
    ) -> tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]:
        """(per-token loss, correct) of each depth at its loss-bearing positions; `mtp_labels` [B, D, S]."""
        losses, corrects = [], []
        previous = labels
        for k, module in enumerate(cast(list[MtpModule], list(self.depths))):
            ahead = previous.masked_fill(previous == IGNORE, pad_id)
            hidden = module(hidden, embed(ahead), rope, mask, causal)
            targets = mtp_labels[:, k]
            loss, correct, _ = token_losses(module.norm(hidden), head_weight, targets, loss_of_rows)
            losses.append(loss)
            corrects.append(correct)
            previous = targets
        return tuple(losses), tuple(corrects)

    def flops_per_token(self, seq_len: int, head: float) -> float:
        """Training FLOPs per position of all depths: each one's projection and block (6 N_mm + 12 d S for its
        one attention layer) and its pass through the shared head (`head`, as the main one counts it)."""
        d = cast(MtpModule, self.depths[0]).proj.out_features
        matmul = sum(m.weight.numel() for m in self.modules() if isinstance(m, nn.Linear))
        return 6.0 * matmul + len(self) * (12.0 * d * seq_len + head)


MTP_PREFIX = "mtp."
"""State-dict prefix of the multi-token prediction modules inside a LanguageModel."""


def without_mtp_modules(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """`state` less the multi-token prediction modules: the main model, which generation and export use."""
    return {name: tensor for name, tensor in state.items() if not name.startswith(MTP_PREFIX)}
