"""mdlm: masked diffusion language modelling (MDLM, Sahoo et al. 2024; LLaDA, Nie et al. 2025).

Per sequence a time t in (eps, 1]; every token of the text is masked independently with probability t (the linear
schedule); a bidirectional encoder predicts the masked tokens, never [MASK] itself (MDLM's SUBS parameterisation).
The loss is the continuous-time negative ELBO: the sum over masked positions of cross-entropy / t, divided by the
sequence length. It is an upper bound on the sequence's negative log-likelihood, in nats per token, and the same
estimator serves training, validation and the yardstick (fixed draws: lmpt.objectives.yardstick).

A window is clm's (data.seq_len + 1 tokens) less its first token, so the two objectives read the same windows and
score the same tokens: the yardstick puts clm's exact likelihood and mdlm's bound on one axis."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import nn

from lmpt.batch import IGNORE, Batch
from lmpt.data.windows import Windows
from lmpt.errors import LmptError
from lmpt.model.build import check_model_config
from lmpt.model.head import compiled_rows_loss, rows_loss
from lmpt.model.language_model import LanguageModel
from lmpt.model.output import ModelOutput
from lmpt.objectives.base import Objective, Stats
from lmpt.objectives.schema import ObjectiveConfig


@dataclass
class MdlmConfig(ObjectiveConfig):
    name: str = "mdlm"
    eps: float = 1e-3
    """Smallest masking time: t is drawn in (eps, 1] (MDLM and LLaDA: 1e-3); the loss weighs a masked token by 1/t."""
    low_discrepancy: bool = True
    """MDLM's antithetic draw: the batch's times are stratified, row i's in the i-th of B equal slices of (eps, 1],
    which cuts the estimator's variance; false: each row's t independent."""
    eval_draws: int = 64
    """Yardstick: fixed passes of masks over the held-out windows (the same in every run); the bound is their mean
    and its standard error comes from their spread (val_bits_per_token_stderr): 64 keep it below 0.01 bits on the
    default held-out windows (8 batches of 16 x 128 tokens)."""


def masking_times(rows: int, gen: torch.Generator, eps: float, low_discrepancy: bool) -> torch.Tensor:
    """[rows] float64 times t in (eps, 1]: uniform, or stratified across the rows (MDLM's antithetic sampling)."""
    u = torch.rand(rows, generator=gen, dtype=torch.float64)
    if low_discrepancy:
        u = (u + torch.arange(rows, dtype=torch.float64)) / rows  # row i in [i/B, (i+1)/B)
    return eps + (1.0 - eps) * (1.0 - u)  # 1 - u lies in (0, 1]: t never reaches eps, reaches 1


def diffusion_mask(
    tokens: torch.Tensor, gen: torch.Generator, times: torch.Tensor, pad_id: int, mask_id: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs, labels) of [B, L] `tokens`: each non-pad token is masked with its row's probability t; labels hold
    the original where masked, IGNORE elsewhere. Every token of the text can be masked, eos included (MDLM and
    LLaDA mask the whole sequence), so the bound covers the tokens clm predicts."""
    masked = (torch.rand(tokens.shape, generator=gen, dtype=torch.float64) < times[:, None]) & (tokens != pad_id)
    inputs = torch.where(masked, torch.full_like(tokens, mask_id), tokens)
    labels = torch.where(masked, tokens, torch.full_like(tokens, IGNORE))
    return inputs, labels


def exact_count_mask(
    tokens: torch.Tensor, gen: torch.Generator, pad_id: int, mask_id: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(inputs, labels, rates) for the bound's low-variance estimate (LLaDA's likelihood evaluation): row i masks
    exactly k_i of its n_i text tokens, k_i uniform on 1..n_i (stratified across the rows), the positions uniform;
    rate k_i / n_i weighs each masked token by n_i / k_i. Integrating t out of the continuous-time bound gives
    exactly this weight (the integral over t of Binomial(k; n, t) / t is 1 / k), so the two estimate one bound."""
    text = tokens != pad_id
    counts = text.sum(dim=1).clamp(min=1).double()
    rows = tokens.shape[0]
    u = (torch.rand(rows, generator=gen, dtype=torch.float64) + torch.arange(rows, dtype=torch.float64)) / rows
    k = torch.minimum(torch.floor(u * counts) + 1, counts)  # stratified, uniform on 1..n_i
    scores = torch.rand(tokens.shape, generator=gen, dtype=torch.float64).masked_fill(~text, 2.0)
    rank = scores.argsort(dim=1).argsort(dim=1)  # each text position's place in a random order of the row
    masked = (rank < k[:, None]) & text
    inputs = torch.where(masked, torch.full_like(tokens, mask_id), tokens)
    labels = torch.where(masked, tokens, torch.full_like(tokens, IGNORE))
    return inputs, labels, (k / counts).float()


def never_predicted(special: Any, model_vocab: int, tokenizer_vocab: int) -> torch.Tensor:
    """[model_vocab] bool: the ids a mask predictor gives no probability ([MASK], and the rows padding the vocabulary
    past the tokenizer's), so its distribution is over the tokens text can hold."""
    excluded = torch.zeros(model_vocab, dtype=torch.bool)
    excluded[special.mask] = True
    excluded[tokenizer_vocab:] = True
    return excluded


class MaskPredictor(LanguageModel):
    """An encoder whose output head never predicts the `excluded` ids (SUBS: the logit of [MASK] is -inf). The
    weights are a plain LanguageModel's: inference loads them as one and excludes the same ids when it samples."""

    def __init__(self, *args: Any, excluded: torch.Tensor, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.register_buffer("excluded", excluded, persistent=False)  # follows .to(device), not in the state
        self.loss_of_rows = self.rows_loss

    def rows_loss(
        self, hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """lmpt.model.head.rows_loss without the excluded ids."""
        return rows_loss(hidden, weight, targets, self.excluded)

    def compile_parts(self, backend: str = "inductor") -> None:
        """The stack compiled as LanguageModel's; the head's loss compiled with the exclusion."""
        super().compile_parts(backend)
        self.loss_of_rows = compiled_rows_loss(backend, self.rows_loss)


class MaskedDiffusion(Objective):
    """The masked diffusion bound on a bidirectional encoder, weighted by 1/t per masked token."""

    name: ClassVar[str] = "mdlm"
    config_class: ClassVar[type] = MdlmConfig
    natural_arch: ClassVar[str] = "encoder"
    supported_archs: ClassVar[tuple[str, ...]] = ("encoder",)

    listing_order: ClassVar[int] = 11
    reference_order: ClassVar[int] = 11
    likelihood: ClassVar[str | None] = "bound"
    export_refusal: ClassVar[str] = (
        "a masked diffusion model samples by iterative unmasking and its likelihood is a bound over masking times: "
        "transformers has no model class for it (a ForMaskedLM class would run but not as it was trained)"
    )
    samples_by_unmasking: ClassVar[bool] = True

    def __init__(self, cfg: Any, tokenizer: Any, seq_len: int, arch: str) -> None:
        super().__init__(cfg, tokenizer, seq_len, arch)
        eps = float(cfg.eps)
        if not 0.0 < eps <= 1.0:
            raise LmptError(f"objective.eps={eps:g} must be in (0, 1]: the masking time t is drawn in (eps, 1]")
        if int(cfg.eval_draws) < 2:
            raise LmptError(
                f"objective.eval_draws={cfg.eval_draws} must be at least 2: the bound's standard error needs two draws"
            )

    @property
    def window_length(self) -> int:
        return self.seq_len + 1  # clm's windows: the first token is dropped, the rest are the tokens clm predicts

    @property
    def expected_loss_fraction(self) -> float:
        return (1.0 + float(self.cfg.eps)) / 2.0  # the mean of t

    @property
    def yardstick_draws(self) -> int:
        """Passes of fixed masks over the held-out windows that the yardstick averages."""
        return int(self.cfg.eval_draws)

    def make_batch(self, windows: Windows, gen: torch.Generator) -> Batch:
        tokens = windows.tokens[:, 1:]
        times = masking_times(tokens.shape[0], gen, float(self.cfg.eps), bool(self.cfg.low_discrepancy))
        inputs, labels = diffusion_mask(tokens, gen, times, self.special.pad, self.special.mask)
        return Batch(input_ids=inputs, labels=labels, attention="bidirectional", mask_rate=times.float())

    def yardstick_batch(self, windows: Windows, gen: torch.Generator) -> Batch:
        """A held-out batch of the yardstick: the same bound as make_batch's, by exact counts of masks (lower
        variance: no pass masks nothing and no weight exceeds the sequence length)."""
        inputs, labels, rates = exact_count_mask(windows.tokens[:, 1:], gen, self.special.pad, self.special.mask)
        return Batch(input_ids=inputs, labels=labels, attention="bidirectional", mask_rate=rates)

    def build_model(self, model_cfg: Any, model_vocab: int) -> nn.Module:
        check_model_config(model_cfg, self.arch, model_vocab)
        excluded = never_predicted(self.special, model_vocab, self.vocab_size)
        return MaskPredictor(model_cfg, self.arch, model_vocab, self.special.pad, excluded=excluded)

    def loss(self, out: ModelOutput, batch: Batch) -> tuple[torch.Tensor, Stats]:
        """Sum over masked tokens of cross-entropy / t, per token of text (non-pad positions): the bound in nats per
        token ("loss"); also the plain masked-token cross-entropy and accuracy."""
        if batch.mask_rate is None:
            raise ValueError("an mdlm batch carries its masking times (Batch.mask_rate)")
        weights = 1.0 / batch.mask_rate.to(out.token_loss.device, torch.float32)[out.token_rows]
        weighted = out.token_loss * weights
        n_text = (batch.input_ids != self.special.pad).sum()
        n_masked = torch.tensor(out.token_loss.numel(), device=out.token_loss.device)
        stats: Stats = {
            "loss": (weighted.sum().detach(), n_text),
            "masked_loss": (out.token_loss.sum().detach(), n_masked),
            "acc": (out.token_correct.sum(), n_masked),
        }
        return weighted.sum() / n_text.clamp(min=1), stats

    def scored_tokens(self, batch: Batch) -> torch.Tensor:
        """Every token of the text: the bound is per token of the sequence, masked or not."""
        text = torch.where(batch.labels != IGNORE, batch.labels, batch.input_ids)
        return text[batch.input_ids != self.special.pad]

    def preview_settings(self) -> list[str]:
        how = "stratified across the batch (MDLM's low-discrepancy draw)" if self.cfg.low_discrepancy else "uniform"
        return [
            f"each row masks every token with its own probability t in ({float(self.cfg.eps):g}, 1], {how}",
            "loss: cross-entropy of each masked token / t, summed, per token of the row (the diffusion bound)",
        ]

    def preview_legend(self) -> list[tuple[str, str]]:
        return [("[MASK]", "mask")]
