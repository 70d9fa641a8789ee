"""Typed schemas of the objective group, one per objective (the other groups are in schema.py). The string
under each field is its documentation, as there."""

from __future__ import annotations

from dataclasses import dataclass, field

from omegaconf import MISSING


@dataclass
class ObjectiveConfig:
    name: str = MISSING
    """Objective: clm, mlm, nsp, electra, span, prefix, ul2-mixture, mtp or fim."""


@dataclass
class ClmConfig(ObjectiveConfig):
    name: str = "clm"
    document_attention: bool = False
    """Keep attention within each packed document instead of across the eos between them."""


@dataclass
class MtpConfig(ClmConfig):
    name: str = "mtp"
    mtp_depth: int = 1
    """Extra prediction modules (DeepSeek-V3 multi-token prediction): module k predicts the token k+1 ahead of
    each position, the main head's next token counting as 1 ahead (0: plain clm)."""
    mtp_weight: float = 0.3
    """lambda: the loss is the main next-token loss + mtp_weight / mtp_depth x the modules' losses (DeepSeek-V3:
    0.3 for its first 10T tokens, then 0.1: a model.init_from stage, whose modules start fresh)."""


@dataclass
class FimConfig(ClmConfig):
    name: str = "fim"
    fim_rate: float = 0.5
    """Share of documents rearranged for fill-in-the-middle (Bavarian et al. 2022); the rest stay plain clm."""
    spm_rate: float = 0.5
    """Share of the rearranged documents in suffix-prefix-middle order (the rest prefix-suffix-middle)."""


@dataclass
class MlmConfig(ObjectiveConfig):
    name: str = "mlm"
    mask_prob: float = 0.15
    """Probability that each eligible token is selected for prediction."""
    mask_token_frac: float = 0.8
    """Share of selected tokens replaced by [MASK]."""
    random_token_frac: float = 0.1
    """Share of selected tokens replaced by a random ordinary token (the rest stay unchanged)."""
    whole_word: bool = False
    """Select whole words: all pieces of a word or none."""
    eval_mask_prob: float = 0.15
    """Fixed yardstick: held-out windows are also scored with this share of tokens masked (all [MASK], the same
    seeded positions in every run), so runs trained at different rates are ranked on one task."""


@dataclass
class NspConfig(MlmConfig):
    name: str = "nsp"
    variant: str = "nsp"
    """nsp: B is the next segment or one from another document; sop: B follows A or the two are swapped."""
    random_pair_prob: float = 0.5
    """Probability that a pair is negative (random document for nsp, swapped order for sop)."""
    short_seq_prob: float = 0.1
    """Probability that a pair is cut to a random shorter length, uniform on [2, seq_len - 3] (BERT; 0: never)."""
    mlm_weight: float = 1.0
    """Weight of the masked-LM loss trained jointly with the pair loss (0 trains the pair head only)."""


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


@dataclass
class SpanConfig(ObjectiveConfig):
    name: str = "span"
    noise_density: float = 0.15
    """Fraction of raw tokens corrupted into spans (r)."""
    mean_span_length: float = 3.0
    """Mean length of a corrupted span (mu)."""


@dataclass
class PrefixConfig(ObjectiveConfig):
    name: str = "prefix"
    split_min: float = 0.0
    """Smallest prefix length as a fraction of the window (the split is at least 1 token in)."""
    split_max: float = 1.0
    """Largest prefix length as a fraction of the window (the split leaves at least 1 target token)."""


@dataclass
class DenoiserConfig:
    kind: str = "R"
    """R (regular span corruption), X (extreme span corruption) or S (sequential, prefix LM)."""
    mean_span_length: float = 3.0
    """Mean span length (R and X)."""
    noise_density: float = 0.15
    """Corrupted fraction for R and X; expected target fraction for S."""
    weight: float = 1.0
    """Relative probability of choosing this denoiser for an example."""


def _ul2_denoisers() -> list[DenoiserConfig]:
    return [
        DenoiserConfig("R", 3.0, 0.15),
        DenoiserConfig("R", 8.0, 0.15),
        DenoiserConfig("S", 0.0, 0.25),
        DenoiserConfig("X", 3.0, 0.5),
        DenoiserConfig("X", 8.0, 0.5),
        DenoiserConfig("X", 64.0, 0.15),
        DenoiserConfig("X", 64.0, 0.5),
    ]


@dataclass
class Ul2Config(ObjectiveConfig):
    name: str = "ul2-mixture"
    denoisers: list[DenoiserConfig] = field(default_factory=_ul2_denoisers)
    """The mixture: each entry's kind, mean span length, rate and weight (default: UL2's seven, uniform)."""
