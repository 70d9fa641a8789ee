"""How much of its data a run sees, and how often: training tokens (examples per step x tokens per example x steps)
and the epochs they make over the training split, per source of a mixture. Past REPEAT_LIMIT epochs a run is told:
more passes over the same text buy little (Muennighoff et al. 2023, "Scaling Data-Constrained Language Models")."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from lmpt.config.schema import TrainerConfig
from lmpt.console import info, warn
from lmpt.objectives.base import Objective

REPEAT_LIMIT = 4.0
SCALING_NOTE = "Muennighoff et al. 2023: returns from repeated data fade after about 4 epochs"


@dataclass(frozen=True)
class SourceTokens:
    """One source's training tokens and mixture weight ("" names the only source of a run without a mixture)."""

    name: str
    weight: float
    tokens: int


@dataclass(frozen=True)
class Exposure:
    """The tokens a run will see and the epochs they make over each source's training split."""

    examples_per_step: int
    tokens_per_example: int
    """Positions the model reads per example (data.seq_len plus the objective's decoder targets)."""
    window_length: int
    """Corpus tokens one example consumes (objective.window_length: longer than seq_len for span corruption)."""
    steps: int
    sources: tuple[SourceTokens, ...]

    @property
    def training_tokens(self) -> int:
        return self.examples_per_step * self.tokens_per_example * self.steps

    @property
    def corpus_tokens(self) -> int:
        """Corpus tokens read over the run: what repeats once the training split is used up."""
        return self.examples_per_step * self.window_length * self.steps

    @property
    def train_tokens(self) -> int:
        return sum(s.tokens for s in self.sources)

    def epochs(self) -> float:
        return self.corpus_tokens / max(self.train_tokens, 1)

    def source_epochs(self) -> dict[str, float]:
        """Epochs over each source's own training text: the mixture deals it its weight's share of the examples."""
        total = sum(s.weight for s in self.sources)
        return {s.name: self.corpus_tokens * s.weight / total / max(s.tokens, 1) for s in self.sources}

    def most_repeated(self) -> tuple[str, float]:
        return max(self.source_epochs().items(), key=lambda item: item[1])

    def describe(self) -> str:
        """One line: the training tokens, how they are counted, and the epochs (the most repeated source's too)."""
        longer = self.window_length != self.tokens_per_example  # span: what repeats is the corpus text each reads
        read = f" reading {self.window_length} corpus tokens each" if longer else ""
        return (
            f"data: {self.training_tokens:,} training tokens ({self.examples_per_step} examples x "
            f"{self.tokens_per_example} tokens{read} x {self.steps:,} steps), {self.epochs_text()}"
        )

    def epochs_text(self) -> str:
        """The epochs over the training text (and the most repeated source's, for a mixture)."""
        text = f"{self.epochs():.2f} epochs of the {self.train_tokens:,} train tokens"
        if len(self.sources) > 1:
            name, epochs = self.most_repeated()
            text += f" (most repeated source: {name}, {epochs:.2f} epochs)"
        return text

    def warning(self) -> str | None:
        """Why the run repeats its data too often, or None within REPEAT_LIMIT epochs."""
        name, epochs = self.most_repeated()
        if epochs <= REPEAT_LIMIT:
            return None
        which = f"source {name}'s training text" if len(self.sources) > 1 else "the training text"
        return f"{which} is seen {epochs:.1f} times ({SCALING_NOTE}): add text or train for fewer steps"


def report_exposure(exposure: Exposure) -> None:
    """The run's data line after its start line, and the warning past REPEAT_LIMIT epochs (rank 0)."""
    info(exposure.describe())
    warning = exposure.warning()
    if warning is not None:
        warn(warning)


def run_exposure(
    trainer: TrainerConfig,
    seq_len: int,
    objective: Objective,
    world_size: int,
    steps: int,
    sources: Iterable[tuple[str, float, int]],
) -> Exposure:
    """The exposure of a run of `steps` optimizer steps over `sources` ((name, weight, training tokens) each)."""
    examples = trainer.batch_size * trainer.grad_accum * world_size
    per_example = seq_len + objective.target_length
    return Exposure(examples, per_example, objective.window_length, steps, tuple(SourceTokens(*s) for s in sources))
