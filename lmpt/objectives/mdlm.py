"""mdlm: masked diffusion language modelling (MDLM, Sahoo et al. 2024; LLaDA, Nie et al. 2025).

Per sequence a time t in (eps, 1]; every token of the text is masked independently with probability t (the linear
schedule); a bidirectional encoder predicts the masked tokens, never [MASK] itself (MDLM's SUBS parameterisation).
The loss is the continuous-time negative ELBO: the sum over masked positions of cross-entropy / t, divided by the
sequence length. It is an upper bound on the sequence's negative log-likelihood, in nats per token, and the same
estimator serves training, validation and the yardstick (fixed draws: lmpt.objectives.yardstick).

A window is clm's (data.seq_len + 1 tokens) less its first token, so the two objectives read the same windows and
score the same tokens: the yardstick puts clm's exact likelihood and mdlm's bound on one axis."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from lmpt.batch import IGNORE, Batch
from lmpt.config.schema import ModelConfig
from lmpt.data.sampler import Windows
from lmpt.errors import LmptError
from lmpt.model.build import check_model_config
from lmpt.model.head import compiled_rows_loss, rows_loss, token_losses
from lmpt.model.language_model import LanguageModel
from lmpt.model.output import ModelOutput
from lmpt.objectives.base import Objective, Reading, Sampling, Stats
from lmpt.objectives.measure import DiffusionBound, Measure
from lmpt.objectives.schema import ObjectiveConfig
from lmpt.rng import generator
from lmpt.tokenizer.special import SpecialTokens

if TYPE_CHECKING:
    from lmpt.tokenizer.base import Tokenizer


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
    score_draws: int = 8
    """Zero-shot choices (BLiMP, the cloze): draws of masks per choice whose mean estimates its diffusion bound
    (LLaDA's likelihood evaluation: k of the choice's n tokens masked, k uniform on 1..n, weight n / k; the context
    never masked). Fixed: every choice, run, control and evaluation sees the same draws. 8 cost about what an
    encoder's pseudo-log-likelihood costs; on BLiMP sentences (a bound of about 128 nats, the tiny model after 300
    steps) a sentence's standard error is about 3 nats with 8 draws and 2.5 with 16."""


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


def never_predicted(special: SpecialTokens, model_vocab: int, tokenizer_vocab: int) -> torch.Tensor:
    """[model_vocab] bool: the ids a mask predictor gives no probability ([MASK], and the rows padding the vocabulary
    past the tokenizer's), so its distribution is over the tokens text can hold."""
    excluded = torch.zeros(model_vocab, dtype=torch.bool)
    excluded[special.mask] = True
    excluded[tokenizer_vocab:] = True
    return excluded


SCORE_DRAWS_SEED = "zero-shot diffusion bound"
"""The coordinate of the zero-shot draws: one generator, the same for every choice, run and evaluation."""


def check_score_draws(draws: int) -> int:
    """`draws` when at least 1; else one LmptError line naming objective.score_draws."""
    if draws < 1:
        raise LmptError(f"objective.score_draws={draws} must be at least 1: a choice's bound is a mean over draws")
    return draws


@dataclass(frozen=True)
class BoundScorer:
    """Zero-shot scoring by the diffusion bound (LLaDA's likelihood evaluation, Nie et al. 2025): a choice's score is
    minus its bound in nats, the mean over `draws` fixed draws of exact-count masks over the choice's tokens alone
    (`exact_count_mask`), the context before them always visible. Every choice draws from the same seeded generator
    (common random numbers: the two choices of a pair, and a run and its untrained control, see the same draws), so
    a choice's score depends on the model and the choice alone, whatever the batch or the order."""

    draws: int
    special: Any
    tokenizer_vocab: int

    @property
    def method(self) -> str:
        return f"minus the diffusion bound (nats, mean over {self.draws} fixed draws of masks)"

    def work(self, rows: list[list[int]]) -> int:
        """Tokens of the masked copies `scores` runs through the model (the progress bar's units)."""
        return self.draws * sum(len(row) for row in rows)

    def choice_draws(self, row: list[int], scored_from: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(inputs, labels, rates) [draws, len(row)]: each draw masks k of the n tokens from `scored_from` on, k
        uniform on 1..n (stratified over the draws), the tokens before `scored_from` never; rate k / n."""
        tokens = torch.tensor(row).repeat(self.draws, 1)
        maskable = tokens.clone()
        maskable[:, :scored_from] = self.special.pad  # exact_count_mask masks only the text, here the choice
        inputs, labels, rates = exact_count_mask(
            maskable, generator(SCORE_DRAWS_SEED), self.special.pad, self.special.mask
        )
        inputs[:, :scored_from] = tokens[:, :scored_from]
        return inputs, labels, rates

    def scores(
        self,
        model: LanguageModel,
        rows: list[list[int]],
        scored_from: list[int],
        batch_size: int,
        advance: Callable[[int], None],
    ) -> list[float]:
        """Minus the bound (nats) of each row's tokens from `scored_from[i]` on, given the rest: `batch_size` rows
        per forward pass, each with its `draws` masked copies. The head gives [MASK] and the ids past the tokenizer's
        no probability, as in training (MaskPredictor). A row with nothing to score scores 0."""
        device = model.head_weight.device
        excluded = never_predicted(self.special, model.vocab_size, self.tokenizer_vocab).to(device)
        totals = torch.zeros(len(rows), dtype=torch.float64)
        order = sorted(range(len(rows)), key=lambda i: len(rows[i]))  # rows of like length share a pass
        for begin in range(0, len(order), batch_size):
            group = order[begin : begin + batch_size]
            drawn = [self.choice_draws(rows[i], scored_from[i]) for i in group]
            width = max(len(rows[i]) for i in group)
            inputs = torch.cat([F.pad(d[0], (0, width - d[0].shape[1]), value=self.special.pad) for d in drawn])
            labels = torch.cat([F.pad(d[1], (0, width - d[1].shape[1]), value=IGNORE) for d in drawn])
            weights = 1.0 / torch.cat([d[2] for d in drawn]).double()
            batch = Batch(input_ids=inputs, labels=labels, attention="bidirectional").to(device)
            hidden = model.hidden_states(batch)
            loss, _, copy = token_losses(hidden, model.head_weight, batch.labels, partial(rows_loss, excluded=excluded))
            per_copy = torch.zeros(inputs.shape[0], dtype=torch.float64)
            per_copy.index_add_(0, copy.cpu(), loss.double().cpu())
            per_row = (per_copy * weights).view(len(group), self.draws).mean(dim=1)
            totals[torch.tensor(group)] = -per_row
            advance(self.draws * sum(len(rows[i]) for i in group))
        return totals.tolist()


class MaskPredictor(LanguageModel):
    """An encoder whose output head never predicts the `excluded` ids (SUBS: the logit of [MASK] is -inf). The
    weights are a plain LanguageModel's: inference loads them as one and excludes the same ids when it samples."""

    excluded: torch.Tensor

    def __init__(self, *args: Any, excluded: torch.Tensor, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.register_buffer("excluded", excluded, persistent=False)  # follows .to(device), not in the state
        self.loss_of_rows = self.rows_loss

    def rows_loss(
        self, hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """lmpt.model.head.rows_loss without the excluded ids."""
        return rows_loss(hidden, weight, targets, self.excluded, uniform=False)  # rows weighed by 1/t

    def compile_parts(self, backend: str = "inductor") -> None:
        """The stack compiled as LanguageModel's; the head's loss compiled with the exclusion."""
        super().compile_parts(backend)
        self.loss_of_rows = compiled_rows_loss(backend, self.rows_loss)


class MaskedDiffusion(Objective):
    """The masked diffusion bound on a bidirectional encoder, weighted by 1/t per masked token."""

    name: ClassVar[str] = "mdlm"
    config_class: ClassVar[type] = MdlmConfig
    cfg: MdlmConfig
    natural_arch: ClassVar[str] = "encoder"
    supported_archs: ClassVar[tuple[str, ...]] = ("encoder",)
    measure_class: ClassVar[type[Measure]] = DiffusionBound

    listing_order: ClassVar[int] = 11
    reference_order: ClassVar[int] = 11
    export_refusal: ClassVar[str] = (
        "a masked diffusion model samples by iterative unmasking and its likelihood is a bound over masking times: "
        "transformers has no model class for it (a ForMaskedLM class would run but not as it was trained)"
    )

    def __init__(self, cfg: MdlmConfig, tokenizer: Tokenizer, seq_len: int, arch: str) -> None:
        super().__init__(cfg, tokenizer, seq_len, arch)
        eps = float(cfg.eps)
        if not 0.0 < eps <= 1.0:
            raise LmptError(f"objective.eps={eps:g} must be in (0, 1]: the masking time t is drawn in (eps, 1]")
        if int(cfg.eval_draws) < 2:
            raise LmptError(
                f"objective.eval_draws={cfg.eval_draws} must be at least 2: the bound's standard error needs two draws"
            )
        check_score_draws(int(cfg.score_draws))

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

    def build_model(self, model_cfg: ModelConfig, model_vocab: int) -> nn.Module:
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

    def inference_predictor(self, model: LanguageModel) -> LanguageModel:
        """The loaded model's head made to exclude what the run's MaskPredictor excluded ([MASK], the padding rows),
        so lmpt-eval's bound is the run's."""
        excluded = never_predicted(self.special, model.head_weight.shape[0], self.vocab_size)
        model.loss_of_rows = partial(rows_loss, excluded=excluded.to(model.head_weight.device))
        return model

    def scored_tokens(self, batch: Batch) -> torch.Tensor:
        """Every token of the text: the bound is per token of the sequence, masked or not."""
        text = torch.where(batch.labels != IGNORE, batch.labels, batch.input_ids)
        return text[batch.input_ids != self.special.pad]

    @classmethod
    def reading(cls, arch: str) -> Reading:
        return Reading.OWN  # by the bound (choice_scorer)

    @classmethod
    def sampling(cls, arch: str) -> Sampling:
        return Sampling.UNMASK

    @classmethod
    def choice_scorer(cls, cfg: ObjectiveConfig, tokenizer: Tokenizer) -> BoundScorer:
        """Zero-shot choices scored by their diffusion bound over objective.score_draws fixed draws (a run saved
        before the key existed, or unknown settings, take its default)."""
        draws = int(getattr(cfg, "score_draws", MdlmConfig.score_draws))  # a DictConfig's missing key: AttributeError
        return BoundScorer(check_score_draws(draws), tokenizer.special, tokenizer.vocab_size)

    def preview_settings(self) -> list[str]:
        how = "stratified across the batch (MDLM's low-discrepancy draw)" if self.cfg.low_discrepancy else "uniform"
        return [
            f"each row masks every token with its own probability t in ({float(self.cfg.eps):g}, 1], {how}",
            "loss: cross-entropy of each masked token / t, summed, per token of the row (the diffusion bound)",
        ]

    def preview_legend(self) -> list[tuple[str, str]]:
        return [("[MASK]", "mask")]
