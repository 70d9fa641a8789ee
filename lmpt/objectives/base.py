"""The contract every objective meets: a pure transform from token windows to a Batch, and its loss."""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Callable
from enum import Enum
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, Protocol, cast

import torch
from omegaconf import OmegaConf
from torch import nn

from lmpt.batch import IGNORE, Batch
from lmpt.config.schema import ModelConfig
from lmpt.data.sampler import Windows
from lmpt.model.build import build_model
from lmpt.model.output import ModelOutput
from lmpt.objectives.measure import Measure
from lmpt.objectives.schema import ObjectiveConfig

if TYPE_CHECKING:
    from lmpt.data.corpus import TokenCorpus
    from lmpt.model.language_model import LanguageModel
    from lmpt.tokenizer.base import Tokenizer
    from lmpt.tokenizer.special import SpecialTokens

Stats = dict[str, tuple[torch.Tensor, torch.Tensor]]
"""Metric name -> (sum, count); the trainer adds them up over micro-steps and reports sum / count."""

ENCODER_LEGEND = (("[MASK]", "mask"), ("random replacement", "random"), ("selected, kept", "kept"))
PREFIX_LEGEND = (("prefix (seen whole)", "prefix"), ("suffix (predicted)", "suffix"))
ATTENTION_BY_ARCH = {
    "decoder": "causal: each position sees itself and earlier positions",
    "encoder": "bidirectional: every position sees every position",
    "encoder-decoder": "encoder: bidirectional over the input; decoder: causal over targets, sees the whole input",
}
"""lmpt-preview's line on attention for an objective that adds nothing to its architecture's masks."""


class ScoringFrame(NamedTuple):
    """How a decoder or encoder-decoder reads a context and scores a continuation (zero-shot multiple choice):
    the model reads `before` + context + `after` first (the decoder's prefix or the encoder's input), then predicts
    `target`, whose first `skip` tokens are not scored."""

    before: list[int]
    context: list[int]
    after: list[int]
    target: list[int]
    skip: int = 0


class Reading(Enum):
    """How an objective reads a text it scores zero-shot (a choice after its context, a minimal pair's sentence)."""

    CAUSAL = "log-likelihood after the context, left to right"
    ENCODER_DECODER = "decoder log-likelihood, the context as the encoder's input"
    PSEUDO_LIKELIHOOD = "pseudo-log-likelihood, its tokens masked one at a time"
    OWN = "the objective's own scorer (Objective.choice_scorer)"


class Sampling(Enum):
    """How lmpt-generate writes text with a run of an objective."""

    CONTINUE = "continues the prompt left to right"
    FILL_SPANS = "fills the prompt's sentinel spans"
    UNMASK = "unmasks an all-[MASK] sequence over a number of steps"
    NONE = "predicts masked tokens rather than generating (lmpt-fill)"


class ChoiceScorer(Protocol):
    """An objective's own way of scoring zero-shot choices (Objective.choice_scorer): each row of ids is scored from
    a position on, the tokens before it read as given context."""

    @property
    def method(self) -> str:
        """What a score is, in words (the records' `method`)."""
        ...

    def work(self, rows: list[list[int]]) -> int:
        """The units of work `scores` advances by in all (a progress bar's total)."""
        ...

    def scores(
        self,
        model: LanguageModel,
        rows: list[list[int]],
        scored_from: list[int],
        batch_size: int,
        advance: Callable[[int], None],
    ) -> list[float]:
        """Each row's score (higher = more likely), `batch_size` rows per forward pass."""
        ...


class Objective(ABC):
    """Subclasses set the class attributes and implement `window_length` and `make_batch`. A subclass that sets
    `name` is an objective: the registry finds it in its module under lmpt/objectives/ (objective=NAME). Everything
    the rest of lmpt asks of an objective is a class attribute or hook here, never a comparison of its name."""

    name: ClassVar[str]
    config_class: ClassVar[type[ObjectiveConfig]]
    """The typed schema of objective=NAME (registered with Hydra's ConfigStore as schema/objective/NAME)."""
    listing_order: ClassVar[int] = 1000
    """Where the objective stands when lmpt lists the objectives (`choose one of clm, mlm, ...`)."""
    reference_order: ClassVar[int] = 1000
    """Where its schema stands in `lmpt --help` and the README's config reference."""
    natural_arch: ClassVar[str]
    supported_archs: ClassVar[tuple[str, ...]]
    n_segments: ClassVar[int] = 0
    """Segment embeddings the model needs (nsp: 2)."""
    n_sequence_classes: ClassVar[int] = 0
    """Classes of the sequence head on the first position (nsp/sop: 2)."""
    perplexity_of: ClassVar[str] = "loss"
    """The stats entry (a token-level loss) whose exp is reported as perplexity."""
    loss_family: ClassVar[str | None] = None
    """Runs whose objectives share a family report comparable val_loss: "next-token" (the same next-token loss
    on the same windows), "masked" (a masked-token loss, comparable at one masking rate); None: its own task."""
    reads_prefix: ClassVar[bool] = False
    """As a decoder, it reads a prompt as a bidirectional prefix (prefix attention), not causally."""
    fills_middle: ClassVar[bool] = False
    """Trained with the fill-in-the-middle sentinels: lmpt-fill writes the middle between a prefix and a suffix."""
    token_head_missing: ClassVar[str] = ""
    """Why the model a run keeps for inference has no trained token head ("" when it has one): lmpt-generate, -fill
    and -eval refuse to predict tokens with it."""
    export_refusal: ClassVar[str] = ""
    """Why a run of it has no transformers counterpart ("" when its architecture decides): lmpt-export refuses it."""
    measure_class: ClassVar[type[Measure]] = Measure
    """How its held-out text is measured (lmpt.objectives.measure): validation's yardstick, lmpt-eval's score of a
    text. Training, lmpt-eval and the reports ask `measure`, never the architecture or the objective's name."""
    likelihood: ClassVar[str | None] = None
    """Its measure's `likelihood` (set from measure_class, never by hand): "exact", "bound" or None, what its
    yardstick in bits per token is of the held-out text (lmpt.report ranks likelihood models on one axis)."""
    preview_targets_caption: ClassVar[str] = ""
    """lmpt-preview: the words before a decoder's targets."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.likelihood = cls.measure_class.likelihood

    def __init__(self, cfg: ObjectiveConfig, tokenizer: Tokenizer, seq_len: int, arch: str) -> None:
        self.cfg = cfg
        self.tokenizer = tokenizer
        self.special = tokenizer.special
        self.vocab_size = tokenizer.vocab_size
        self.seq_len = seq_len
        self.arch = arch
        self.max_steps: int | None = None  # the run's length in optimizer steps, once plan_run has told it

    @functools.cached_property
    def measure(self) -> Measure:
        """How this objective's held-out text is measured (its measure_class, over this objective)."""
        return self.measure_class(self)

    def with_settings(self, settings: dict[str, Any]) -> Objective:
        """The same objective with some of its settings changed (the fixed-rate yardstick's masking)."""
        changed = cast(ObjectiveConfig, OmegaConf.merge(self.cfg, settings))  # a node of the same schema's fields
        return type(self)(changed, self.tokenizer, self.seq_len, self.arch)

    def inference_predictor(self, model: LanguageModel) -> LanguageModel:
        """The model lmpt-eval loads, predicting as it did in training (mdlm: never [MASK]); by default as it is."""
        return model

    @property
    @abstractmethod
    def window_length(self) -> int:
        """Raw corpus tokens per example the sampler must provide."""

    @property
    def target_length(self) -> int:
        """Decoder length of an encoder-decoder batch (0 for single-stack architectures)."""
        return 0

    @property
    def expected_loss_fraction(self) -> float:
        """Expected share of the positions the head scores (target_length, else seq_len) that carry loss; a
        compute budget turns FLOPs into steps with it."""
        return 1.0

    @property
    def yardstick_draws(self) -> int:
        """Passes of fixed draws over the held-out windows the yardstick averages (a bound's standard error comes
        from their spread); 1 for every objective whose yardstick draws nothing or once."""
        return 1

    def scored_tokens(self, batch: Batch) -> torch.Tensor:
        """The ids whose cost the validation loss averages (val_bpb counts their bytes): the labels that carry
        loss; an objective whose loss is per token of the whole text (mdlm) returns that text."""
        return batch.labels[batch.labels != IGNORE]

    def yardstick_batch(self, windows: Windows, gen: torch.Generator) -> Batch:
        """A held-out batch of a bound's yardstick (likelihood "bound"), drawn from `gen`: by default make_batch's."""
        return self.make_batch(windows, gen)

    @abstractmethod
    def make_batch(self, windows: Windows, gen: torch.Generator) -> Batch:
        """Turn windows into a batch; every random draw comes from `gen` (seeded by (seed, step, ...)). Without a
        step it is the form held-out batches take (validation, yardstick)."""

    def plan_run(self, max_steps: int) -> None:
        """Told once, before training, how many optimizer steps the run has: trainer.max_steps, or with a
        trainer.budget the steps it buys at the expected cost per step (lmpt.train.budget). Objectives that change
        over training read their progress as step / max_steps (`progress`), never from state, so a resumed run
        makes the same batches. Every process and data-loader worker holds the same value."""
        self.max_steps = max(1, int(max_steps))

    def progress(self, step: int) -> float:
        """How far training is at optimizer step `step`: step / max_steps, clipped to [0, 1]."""
        if self.max_steps is None:
            raise RuntimeError(f"objective {self.name} changes over training: call plan_run(max_steps) first")
        return min(1.0, max(0.0, step / self.max_steps))

    def batch_at(self, windows: Windows, gen: torch.Generator, step: int) -> Batch:
        """The training batch of optimizer step `step` (lmpt.train.batches calls it): make_batch's, unless the
        objective changes over training (a masking-rate schedule, a switch of objective, a mixture of batch
        kinds); then a pure function of (windows, gen, step, max_steps)."""
        return self.make_batch(windows, gen)

    def build_model(self, model_cfg: ModelConfig, model_vocab: int) -> nn.Module:
        """A freshly initialised model for this objective (the objective decides the architecture): a
        LanguageModel of `self.arch`; electra overrides it with its generator and discriminator."""
        return build_model(
            model_cfg, self.arch, model_vocab, self.special.pad, self.n_segments, self.n_sequence_classes
        )

    def check_corpus(self, corpus: TokenCorpus, text: str) -> None:  # noqa: B027 (optional hook)
        """Refuse a corpus this objective cannot use: one LmptError line naming `text` (which split, from which
        files: "the validation text (data.val_paths=[...])") and what to do. Most objectives take any."""

    def loss(self, out: ModelOutput, batch: Batch) -> tuple[torch.Tensor, Stats]:
        """Mean cross-entropy over loss-bearing tokens, with token accuracy."""
        n = torch.tensor(out.token_loss.numel(), device=out.token_loss.device)
        stats: Stats = {
            "loss": (out.token_loss.sum().detach(), n),
            "acc": (out.token_correct.sum(), n),
        }
        return out.token_loss.mean(), stats

    @classmethod
    def text_frame(cls, special: SpecialTokens) -> tuple[list[int], list[int]]:
        """(before, after): the ids an encoder run reads around one text it scores or fills (nsp: [CLS], [SEP])."""
        return [], []

    @classmethod
    def scoring_frame(cls, special: SpecialTokens, context: list[int], target: list[int]) -> ScoringFrame:
        """`target` after `context` in the form the objective trained on: by default (decoders) the context after
        eos, where every training document starts (an empty one: eos alone), as lmpt-generate reads a prompt and an
        export's tokenizer encodes a text. The eos leads the context, so a context too long for the model loses it
        first, as lm_eval cuts the bos it encoded with the context."""
        return ScoringFrame([], [special.eos, *context], [], target)

    @classmethod
    def choice_scorer(cls, cfg: ObjectiveConfig, tokenizer: Tokenizer) -> ChoiceScorer | None:
        """How zero-shot choices (multiple choice, minimal pairs) are scored when the objective has its own way, from
        the run's objective settings `cfg` (None: unknown, the defaults) (mdlm: the diffusion bound over fixed
        draws); None (the default): by the architecture, a decoder's or encoder-decoder's log-likelihood, an
        encoder's pseudo-log-likelihood."""
        return None

    @classmethod
    def reading(cls, arch: str) -> Reading:
        """How a run of it on `arch` reads zero-shot choices and minimal pairs: by default what the architecture gives
        (a decoder left to right, an encoder-decoder by its decoder, an encoder by pseudo-log-likelihood); an objective
        with its own scorer (choice_scorer) says OWN."""
        return {"decoder": Reading.CAUSAL, "encoder-decoder": Reading.ENCODER_DECODER}.get(
            arch, Reading.PSEUDO_LIKELIHOOD
        )

    @classmethod
    def sampling(cls, arch: str) -> Sampling:
        """How lmpt-generate writes with a run of it on `arch`: a decoder continues, an encoder-decoder fills spans, an
        encoder does not generate (lmpt-fill fills its masks); masked diffusion unmasks."""
        return {"decoder": Sampling.CONTINUE, "encoder-decoder": Sampling.FILL_SPANS}.get(arch, Sampling.NONE)

    @property
    def continues_text(self) -> bool:
        """A run of it writes by continuing a prompt (the sample a run prints when it ends)."""
        return self.sampling(self.arch) is Sampling.CONTINUE

    @classmethod
    def span_filling_prefix(cls, special: SpecialTokens) -> list[int]:
        """Ids before an encoder-decoder's input when it fills sentinel spans (ul2-mixture: its R mode token)."""
        return []

    @classmethod
    def inference_state(cls, state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The part of the trained weights that inference loads as a plain LanguageModel."""
        return state

    def describe_attention(self) -> str:
        """lmpt-preview: who attends to whom, in one line. By default what the architecture implies; an objective
        whose masks differ (prefix, mixtures, segments) says so."""
        return ATTENTION_BY_ARCH[self.arch]

    def preview_settings(self) -> list[str]:
        """lmpt-preview: what the objective's settings amount to at this data.seq_len, after the settings."""
        return []

    def preview_legend(self) -> list[tuple[str, str]]:
        """lmpt-preview: (label, style key) of each colour the objective's inputs use."""
        return [*(ENCODER_LEGEND if self.arch == "encoder" else ()), *(PREFIX_LEGEND if self.arch == "decoder" else ())]

    def preview_view(self, batch: Batch) -> tuple[Batch, bool]:
        """lmpt-preview: (the batch as shown, aligned). aligned: each label sits at the position whose token it
        restores, so the corruption reads off the input (BERT); otherwise labels are what follows a position."""
        return batch, self.arch == "encoder"

    def pair_labels(self) -> tuple[str, str]:
        """lmpt-preview: the names of sequence labels 0 and 1 (objectives with a sequence head)."""
        return "0", "1"
