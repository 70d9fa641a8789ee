"""The repetition grid: each scale's keys and its recipe (the vocabulary, the context and the batch), the cells of data
its runs read (each budget read once, each U at each epoch count), the ladder's rungs each cell trains, and the runs
that follow. Every run reads the first U tokens of the training text; its warm-up is a tenth of its steps."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from lmpt.errors import LmptError
from lmpt.reproduce.ladder import TOKENS_PER_PARAMETER, Shape, check_ladder, optimal_parameters, training_flops
from lmpt.reproduce.reproduction import AR, DIFFUSION, PlannedRun, Reproduction, Scale, corpus_keys, numbers

OBJECTIVES = (AR, DIFFUSION)
PAPER_VOCAB = 50_257
PAPER_CONTEXT = 2_048
"""GPT-2's tokenizer and the paper's context."""
COMMON = ("trainer.eval_every=0", "trainer.sample_tokens=0")
VAL_FRACTION = 0.05
"""lmpt's data.val_fraction: the share of the streamed documents held out (c4's data.max_tokens leaves room for it)."""


@dataclass(frozen=True)
class Recipe:
    """What a scale trains with besides its grid keys: the vocabulary, the context and the batch."""

    vocab: int
    seq_len: int
    batch: int
    """Sequences a micro-batch."""
    accum: int = 1
    """Micro-batches an optimizer step."""
    extra: tuple[str, ...] = ()

    @property
    def tokens_per_step(self) -> int:
        return self.batch * self.accum * self.seq_len

    def keys(self) -> tuple[str, ...]:
        keys = (
            *self.extra,
            f"tokenizer.vocab_size={self.vocab}",
            f"data.seq_len={self.seq_len}",
            f"trainer.batch_size={self.batch}",
        )
        return keys + ((f"trainer.grad_accum={self.accum}",) if self.accum > 1 else ())


RECIPES = {
    Scale.laptop: Recipe(vocab=512, seq_len=128, batch=16),
    Scale.paper: Recipe(
        vocab=PAPER_VOCAB,
        seq_len=PAPER_CONTEXT,
        batch=32,
        accum=8,
        extra=("tokenizer=bytelevel", "trainer.precision=bf16"),
    ),
}
"""The laptop's 512 pieces keep the embedding from being most of each rung (at 2,048 the narrow rungs are 83-92%
embedding) and double the bundled TinyStories text's tokens (2.1M), so that single-epoch runs can be compute-optimal;
the paper's: GPT-2's vocabulary, 2,048 positions, 256 sequences a step."""


@dataclass(frozen=True)
class Cell:
    """One run's data: U unique tokens, the epochs asked, and the optimizer steps and tokens that follow."""

    unique: int
    epochs: float
    steps: int
    tokens: int

    @property
    def seen(self) -> int:
        """The unique tokens it reads (a run shorter than one epoch reads only as many as it trains on)."""
        return min(self.unique, self.tokens)


class RepetitionGrid(Reproduction):
    """The grid, from its keys (each a list; `scale` gives their defaults), and the runs it plans; the reproduction
    (lmpt.reproduce.repetition.reproduction) adds what they show:

    | key | what it sets |
    | --- | --- |
    | corpus | the text: a data group of lmpt's (tinystories, wikitext, ...), a path to text, or c4 (the paper's) |
    | ladder | model widths (lmpt.reproduce.ladder: a layer and a head per 32 dimensions); every rung trains at every |
    |        | (unique tokens, epochs) cell, so sizes on both sides of the compute-optimal one tell excess |
    |        | parameters (R_N*) from repeated data (R_D*) |
    | budgets | training tokens D of single-epoch runs (D unique tokens read once), each over the rungs of at most |
    |         | its compute-optimal size (D / 20 parameters): stage 1's runs, the part Chinchilla's iso-FLOP points |
    |         | play in the notebook; a budget of 4 U is also "4 epochs nearly free"'s unique-data side |
    | unique_tokens | the unique tokens U of the repeated runs: the first U tokens of the training text |
    | epochs | passes over each U: a run reads D = epochs x U tokens (1: U read once, sized as a budget's runs) |

    A grid from which the fit cannot tell its constants apart (one rung, no repetition, too few single-epoch runs
    for stage 1, no rung past N_opt(U)) is refused in one line (`_check_identifies`)."""

    grid_keys: ClassVar[tuple[str, ...]] = ("corpus", "ladder", "budgets", "unique_tokens", "epochs")
    scales: ClassVar[dict[Scale, dict]] = {
        Scale.laptop: {
            "corpus": ["tinystories"],
            "ladder": ["16", "32", "64"],
            "budgets": ["250000", "400000", "600000", "1000000"],
            "unique_tokens": ["62500", "250000"],
            "epochs": ["2", "4", "8", "16", "32"],
            "seeds": 4,
        },
        Scale.paper: {
            "corpus": ["c4"],
            "ladder": ["128", "256", "384", "512", "768"],
            "budgets": ["400000000", "1500000000", "6000000000"],
            "unique_tokens": ["100000000"],
            "epochs": ["2", "4", "8", "16", "32", "64"],
            "seeds": 3,
        },
    }

    def __init__(self, scale: Scale = Scale.laptop, seeds: int | None = None, **given: list[str]) -> None:
        super().__init__(scale, seeds, **given)
        self.recipe = RECIPES[self.scale]
        step = self.recipe.tokens_per_step
        if len(self.grid["corpus"]) != 1:
            raise LmptError(f"corpus={_listed(self.grid['corpus'])} must be one text: give one data group or path")
        self.corpus = self.grid["corpus"][0]
        widths = sorted(set(numbers(self, "ladder", int, 1)))
        self.ladder = check_ladder(widths, self.recipe.vocab, self.recipe.seq_len)
        self.budgets = sorted(set(numbers(self, "budgets", int, step)))
        self.unique = sorted(set(numbers(self, "unique_tokens", int, step)))
        self.epochs = sorted(set(numbers(self, "epochs", float, 1)))
        self._check_identifies()

    def _check_identifies(self) -> None:
        """Refuse, in one line, a grid from which the fit cannot tell its constants apart."""
        ladder, epochs = _listed(self.grid["ladder"]), _listed(self.grid["epochs"])
        if len(self.ladder) < 2:
            raise LmptError(
                f"ladder={ladder} gives one model size: R_N* (excess parameters) is fitted from sizes that differ at "
                "the same unique tokens and epochs; give 2 or more widths"
            )
        if max(self.epochs) <= 1:
            raise LmptError(
                f"epochs={epochs} repeats nothing: R_D* is fitted from runs that repeat their data; give an epoch "
                "count above 1"
            )
        for cell in self.cells():
            if not self.rungs(cell):
                smallest = self.ladder[0]
                least = smallest.parameters * TOKENS_PER_PARAMETER
                raise LmptError(
                    f"a single-epoch run of {cell.unique:,} tokens has no rung: the smallest, w{smallest.width} "
                    f"({smallest.parameters:,} parameters), is over the compute-optimal size "
                    f"there; give budgets of at least {least:,.0f} tokens"
                )
        base = self.stage_one_runs()
        if len(base) < 4 or len({n for n, _ in base}) < 2 or len({d for _, d in base}) < 2:
            raise LmptError(
                f"budgets={_listed(self.grid['budgets'])} with ladder={ladder} give the base law (stage 1: E, A, B, "
                f"alpha) {len(base)} single-epoch runs of at most the compute-optimal size (N <= D / "
                f"{TOKENS_PER_PARAMETER:g}); it needs 4, at 2 or more sizes and token "
                "counts: give larger or more budgets"
            )
        largest = max(shape.parameters for shape in self.ladder)
        if all(largest <= optimal_parameters(u) for u in self.unique):
            raise LmptError(
                f"no rung of ladder={ladder} exceeds the compute-optimal size for unique_tokens="
                f"{_listed(self.grid['unique_tokens'])} (U / {TOKENS_PER_PARAMETER:g} parameters): R_N* (excess "
                "parameters) is not identified; give wider rungs or fewer unique tokens"
            )

    def rungs(self, cell: Cell) -> list[Shape]:
        """The ladder's rungs a cell trains: every rung where the data repeats; where it is read once, the rungs of
        at most the compute-optimal size for its tokens (stage 1's runs, in the part of Chinchilla's iso-FLOP
        points: a larger one loses to excess parameters, which that law does not model)."""
        if cell.tokens > cell.unique:
            return list(self.ladder)
        return [s for s in self.ladder if s.parameters <= optimal_parameters(cell.tokens)]

    def stage_one_runs(self) -> set[tuple[int, int]]:
        """The (parameters, tokens) of the single-epoch runs: stage 1's."""
        return {
            (shape.parameters, cell.tokens)
            for cell in self.cells()
            if cell.tokens <= cell.unique
            for shape in self.rungs(cell)
        }

    def cells(self) -> list[Cell]:
        """The data of every run: each budget read once, then each U at each epoch count (a repeated cell that is a
        budget's single-epoch run is planned once)."""
        step = self.recipe.tokens_per_step
        found: dict[tuple[int, int], Cell] = {}
        for unique, epochs in [(d, 1.0) for d in self.budgets] + [(u, e) for u in self.unique for e in self.epochs]:
            steps = max(1, int(unique * epochs // step))
            found.setdefault((unique, steps), Cell(unique, epochs, steps, steps * step))
        return list(found.values())

    def runs(self) -> list[PlannedRun]:
        planned = []
        cells = self.cells()
        data = self._corpus_keys(max(cell.seen for cell in cells))
        for seed in range(self.seeds):
            for objective in OBJECTIVES:
                for cell in cells:
                    for shape in self.rungs(cell):
                        planned.append(self._run(objective, shape, cell, seed, data))
        return planned

    def _corpus_keys(self, unique: int) -> tuple[str, ...]:
        keys = corpus_keys(self.corpus)
        if "data=hf" in keys:  # a streamed corpus stops at data.max_tokens: the largest U and the held-out share
            return (*keys, f"data.max_tokens={math.ceil(unique / (1 - VAL_FRACTION) / 1e6)}M")
        return keys

    def _run(self, objective: str, shape: Shape, cell: Cell, seed: int, data: tuple[str, ...]) -> PlannedRun:
        label = (
            shape.label if shape.vocab == 2048 else f"w{shape.width}-v{shape.vocab}"
        )  # the ladder width at its vocabulary
        return PlannedRun(
            f"{objective}-w{shape.width}-u{cell.unique}-{cell.epochs:g}x-seed{seed}",
            (
                f"objective={objective}",
                *data,
                *self.recipe.keys(),
                *shape.keys(),
                f"data.unique_tokens={cell.unique}",
                f"trainer.max_steps={cell.steps}",
                f"scheduler.warmup_steps={max(1, cell.steps // 10)}",  # a tenth of every run
                f"trainer.seed={seed}",
                *COMMON,
            ),
            {
                "objective": objective,
                "model": label,
                "width": shape.width,
                "parameters": shape.parameters,
                "unique": cell.unique,
                "seen": cell.seen,
                "epochs": cell.epochs,
                "tokens": cell.tokens,
                "seed": seed,
            },
            training_flops(shape, objective) * cell.tokens,
            6.0 * shape.parameters * cell.tokens,
        )


def _listed(values: Sequence[str]) -> str:
    return f"[{','.join(values)}]"
