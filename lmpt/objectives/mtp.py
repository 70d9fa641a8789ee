"""mtp: multi-token prediction after DeepSeek-V3 (arXiv 2412.19437, section 2.2).

The main head does plain clm on the same windows (its loss is reported as `loss`, so runs compare with clm);
module k (k = 1..D, `lmpt.model.mtp`) predicts the token k+1 ahead of each position, counting the main head's
next token as 1 ahead. The training loss is L_main + lambda / D x sum_k L_k (lambda = objective.mtp_weight).

Packed documents: clm packs them with an eos between, and the eos belongs to the document it ends
(`clm.document_ids`). A module's target counts only when it lies in the same document as the position: so a
module may predict its document's eos, never a token after it. The main head keeps clm's rule (at an eos it
predicts the next document's first token), so its loss is exactly clm's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from lmpt.batch import IGNORE, Batch
from lmpt.config.schema import ModelConfig
from lmpt.data.sampler import Windows
from lmpt.errors import LmptError
from lmpt.model.build import build_model
from lmpt.model.language_model import LanguageModel
from lmpt.model.output import ModelOutput
from lmpt.objectives.base import Objective, Stats
from lmpt.objectives.clm import CausalLM, ClmConfig, document_ids
from lmpt.tokenizer.base import Tokenizer


def tokens_ahead(tokens: torch.Tensor, depth: int, eos: int, pad: int) -> torch.Tensor:
    """[B, depth, S] targets of modules 1..depth for windows `tokens` [B, S+1] (inputs are tokens[:, :S]):
    entry [b, k-1, t] is tokens[b, t+k+1], or IGNORE past the window, on padding, or in another document."""
    batch_size, seq_len = tokens.shape[0], tokens.shape[1] - 1
    docs = document_ids(tokens, eos)
    targets = torch.full((batch_size, depth, seq_len), IGNORE, dtype=tokens.dtype)
    for k in range(1, depth + 1):
        n = seq_len - k  # positions t whose target t+k+1 is still inside the window
        if n <= 0:
            break
        ahead = tokens[:, k + 1 :]
        same_document = docs[:, k + 1 :] == docs[:, :n]
        targets[:, k - 1, :n] = torch.where(same_document & (ahead != pad), ahead, IGNORE)
    return targets


@dataclass
class MtpConfig(ClmConfig):
    name: str = "mtp"
    mtp_depth: int = 1
    """Extra prediction modules (DeepSeek-V3 multi-token prediction): module k predicts the token k+1 ahead of
    each position, the main head's next token counting as 1 ahead (0: plain clm)."""
    mtp_weight: float = 0.3
    """lambda: the loss is the main next-token loss + mtp_weight / mtp_depth x the modules' losses (DeepSeek-V3:
    0.3 for its first 10T tokens, then 0.1: a model.init_from stage, whose modules start fresh)."""


class MultiTokenPredictionLM(CausalLM):
    """clm plus `mtp_depth` modules that each predict one more token ahead, sharing embedding and head."""

    name: ClassVar[str] = "mtp"
    config_class: ClassVar[type] = MtpConfig
    cfg: MtpConfig

    listing_order: ClassVar[int] = 7
    reference_order: ClassVar[int] = 7
    loss_family: ClassVar[str | None] = "next-token"  # its main head's loss is clm's
    preview_targets_caption: ClassVar[str] = ""

    def preview_legend(self) -> list[tuple[str, str]]:
        return Objective.preview_legend(self)

    def preview_settings(self) -> list[str]:
        depth = int(self.cfg.mtp_depth)
        if depth <= 0:
            return []
        return [
            f"targets: the main head's next token, and module k = 1..{depth} the token k+1 ahead within its document"
        ]

    def __init__(self, cfg: MtpConfig, tokenizer: Tokenizer, seq_len: int, arch: str) -> None:
        super().__init__(cfg, tokenizer, seq_len, arch)
        self.depth, self.weight = int(cfg.mtp_depth), float(cfg.mtp_weight)
        if self.depth < 0:
            raise LmptError(f"objective.mtp_depth={self.depth} must be 0 or more (0 trains plain clm)")
        if self.depth >= seq_len:
            raise LmptError(
                f"objective.mtp_depth={self.depth} predicts {self.depth + 1} tokens ahead, beyond data.seq_len="
                f"{seq_len}: lower objective.mtp_depth or raise data.seq_len"
            )
        if self.weight < 0:
            raise LmptError(f"objective.mtp_weight={self.weight} must be 0 or more (DeepSeek-V3: 0.3, later 0.1)")

    def build_model(self, model_cfg: ModelConfig, model_vocab: int) -> LanguageModel:
        """A decoder with `mtp_depth` prediction modules beside it."""
        return build_model(model_cfg, self.arch, model_vocab, self.special.pad, mtp_depth=self.depth)

    def make_batch(self, windows: Windows, gen: torch.Generator) -> Batch:
        batch = super().make_batch(windows, gen)
        if self.depth > 0:
            batch.mtp_labels = tokens_ahead(windows.tokens, self.depth, self.special.eos, self.special.pad)
        return batch

    def loss(self, out: ModelOutput, batch: Batch) -> tuple[torch.Tensor, Stats]:
        """The main next-token loss (reported as `loss`, as clm's) + mtp_weight / depth x the modules' mean
        losses, each module's loss and accuracy reported as mtp_loss_k / mtp_acc_k."""
        total, stats = super().loss(out, batch)
        for k, (loss, correct) in enumerate(zip(out.mtp_token_loss, out.mtp_token_correct, strict=True), start=1):
            n = torch.tensor(loss.numel(), device=loss.device)
            stats[f"mtp_loss_{k}"] = (loss.sum().detach(), n)
            stats[f"mtp_acc_{k}"] = (correct.sum(), n)
            total = total + self.weight / self.depth * loss.sum() / n.clamp(min=1)
        return total, stats
