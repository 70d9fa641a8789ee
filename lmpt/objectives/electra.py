"""electra: ELECTRA's replaced-token detection (Clark et al. 2020, after google-research/electra).

make_batch masks as mlm does (`mask_tokens`, every selected token [MASK] by default) and draws the seed of the
generator's samples; the model (`lmpt.model.electra.ElectraModel`) runs generator -> sample -> discriminator; the
loss is the generator's MLM loss + disc_weight x the discriminator's binary cross-entropy over every non-pad
position (the reference's gen_weight 1, disc_weight 50)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from lmpt.batch import Batch
from lmpt.config.schema import ModelConfig
from lmpt.data.sampler import Windows
from lmpt.errors import LmptError
from lmpt.model.build import check_model_config
from lmpt.model.electra import ElectraModel, ElectraOutput, discriminator_state
from lmpt.objectives.base import Objective, Stats
from lmpt.objectives.checks import require_at_least, require_fraction, require_open_unit
from lmpt.objectives.masking import mask_tokens
from lmpt.objectives.measure import FixedRateMaskedLoss, Measure
from lmpt.objectives.schema import ObjectiveConfig
from lmpt.tokenizer.base import Tokenizer

SEED_BOUND = 1 << 62
"""Sample seeds are drawn uniformly below this."""


def check_generator_size(size: float) -> float:
    """objective.generator_size: the generator's width as a fraction of the discriminator's, in (0, 1]."""
    size = float(size)
    if size > 1.0:
        raise LmptError(
            f"objective.generator_size={size:g} makes the generator wider than the discriminator: use a fraction in "
            "(0, 1] of model.d_model (ELECTRA: 0.25)"
        )
    if size <= 0.0:
        raise LmptError(f"objective.generator_size={size:g} must be positive: use a fraction in (0, 1] (ELECTRA: 0.25)")
    return size


@dataclass
class ElectraConfig(ObjectiveConfig):
    name: str = "electra"
    mask_prob: float = 0.15
    """Probability that each eligible token is masked for the generator (ELECTRA: 0.15)."""
    mask_token_frac: float = 1.0
    """Share of masked tokens shown to the generator as [MASK], the rest unchanged (1.0: all [MASK]; the released
    code's pretrain_helpers.mask uses 0.85)."""
    generator_size: float = 0.25
    """Generator width as a fraction of the discriminator's model.d_model, in (0, 1]; its heads keep the
    discriminator's head width and its ffn_dim shrinks by the same fraction (ELECTRA: 0.25)."""
    disc_weight: float = 50.0
    """Weight of the discriminator's replaced-token loss against the generator's MLM loss (ELECTRA: 50)."""
    temperature: float = 1.0
    """Temperature of the generator's softmax when sampling the replacements (ELECTRA: 1)."""


class ReplacedTokenDetection(Objective):
    """A small MLM generator fills masked positions with samples; the discriminator finds the replaced tokens."""

    name: ClassVar[str] = "electra"
    config_class: ClassVar[type] = ElectraConfig
    cfg: ElectraConfig
    natural_arch: ClassVar[str] = "encoder"
    supported_archs: ClassVar[tuple[str, ...]] = ("encoder",)
    measure_class: ClassVar[type[Measure]] = FixedRateMaskedLoss
    perplexity_of: ClassVar[str] = "gen_loss"

    listing_order: ClassVar[int] = 6
    reference_order: ClassVar[int] = 3
    loss_family: ClassVar[str | None] = "masked"
    token_head_missing: ClassVar[str] = (
        "this run's model is an electra discriminator, which tells replaced tokens from original ones and has no "
        "trained token head"
    )

    @classmethod
    def inference_state(cls, state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The discriminator is the trained encoder; the generator is left behind."""
        return discriminator_state(state)

    def preview_settings(self) -> list[str]:
        return [
            f"in training the generator's samples replace the selected tokens; the discriminator labels all "
            f"{self.seq_len} positions replaced or original"
        ]

    def __init__(self, cfg: ElectraConfig, tokenizer: Tokenizer, seq_len: int, arch: str) -> None:
        super().__init__(cfg, tokenizer, seq_len, arch)
        self.mask_prob = require_open_unit(cfg.mask_prob, "objective.mask_prob")
        self.mask_token_frac = require_fraction(cfg.mask_token_frac, "objective.mask_token_frac")
        self.generator_size = check_generator_size(cfg.generator_size)
        self.disc_weight = require_at_least(cfg.disc_weight, "objective.disc_weight", 0.0)
        self.temperature = float(cfg.temperature)
        if self.temperature <= 0:
            raise LmptError(f"objective.temperature={cfg.temperature} must be positive (ELECTRA: 1.0)")

    @property
    def expected_loss_fraction(self) -> float:
        """The generator's MLM head runs on the masked share; the discriminator's cost is per position regardless."""
        return self.mask_prob

    @property
    def window_length(self) -> int:
        return self.seq_len

    def describe_attention(self) -> str:
        return "bidirectional: every position sees every position, in the generator and in the discriminator"

    def make_batch(self, windows: Windows, gen: torch.Generator) -> Batch:
        inputs, labels = mask_tokens(
            windows.tokens,
            gen,
            special=self.special,
            vocab_size=self.vocab_size,
            mask_prob=self.mask_prob,
            mask_token_frac=self.mask_token_frac,
            random_token_frac=0.0,
        )
        seed = int(torch.randint(SEED_BOUND, (1,), generator=gen))
        return Batch(input_ids=inputs, labels=labels, attention="bidirectional", sample_seed=seed)

    def samplable(self, model_vocab: int) -> torch.Tensor:
        """[model_vocab] bool: the ids the generator may sample, the ordinary ones (reserved and padding rows never)."""
        allowed = torch.zeros(model_vocab, dtype=torch.bool, device="cpu")  # also when the model is built on meta
        allowed[: self.vocab_size] = True
        allowed[[i for i in self.special.reserved_ids() if i < model_vocab]] = False
        return allowed

    def build_model(self, model_cfg: ModelConfig, model_vocab: int) -> ElectraModel:
        check_model_config(model_cfg, self.arch, model_vocab)
        return ElectraModel(
            model_cfg, model_vocab, self.special.pad, self.samplable(model_vocab), self.generator_size, self.temperature
        )

    def loss(self, out: ElectraOutput, batch: Batch) -> tuple[torch.Tensor, Stats]:  # type: ignore[override]
        """Mean generator MLM loss + disc_weight x mean discriminator BCE."""
        token_loss, disc_loss = out.token_loss, out.disc_loss
        assert disc_loss is not None and out.disc_correct is not None and out.replaced is not None
        n = torch.tensor(token_loss.numel(), device=token_loss.device)
        m = torch.tensor(disc_loss.numel(), device=disc_loss.device)
        gen_loss = token_loss.sum() / n.clamp(min=1)
        total = gen_loss + self.disc_weight * disc_loss.sum() / m.clamp(min=1)
        stats: Stats = {
            "loss": (total.detach(), torch.ones((), device=total.device)),
            "gen_loss": (token_loss.sum().detach(), n),
            "gen_acc": (out.token_correct.sum(), n),
            "disc_loss": (disc_loss.sum().detach(), m),
            "disc_acc": (out.disc_correct.sum(), m),
            "replaced_frac": (out.replaced.sum(), m),
        }
        return total, stats
