"""The diffusion-gap grid: clm and mdlm on the same text at a ladder of model sizes, each trained once per token budget
(a run per budget, its schedule spanning it), over `seeds` seeds. Every run reads its tokens once: all draw their
windows from the same first U tokens of the corpus (data.unique_tokens), U what the largest budget reads, so no run
repeats a window and a larger budget reads more of the text. The seed fixes a run's windows, so clm and mdlm of one
seed read the same text.

Each objective at its own learning rate, searched in every cell. At scale=laptop every (size, budget, objective) is
trained at each factor of its sweep (LR_SWEEP: one factor scales both of Muon's peaks, optimizer.lr and
optimizer.adamw_lr) and the cell's figure is its best factor's (the lowest mean over seeds); the document lists every
factor's figure and names the cells whose best may lie beyond the sweep (lmpt.reproduce.diffusion_gap.gap's
Cell.at_an_end: then the condition "learning rate" is missed). Choosing from the grid's own runs needs no second phase
(lmpt.reproduce.grid plans every run before any starts), and one search at the smallest budget would not do: the best
factor moves with the budget, and at the smallest mdlm has not yet left predicting each token's frequency at any
factor.
These runs, one seed of the micro model on the bundled TinyStories text (2,048 pieces), set the sweeps (held-out bits
per token; 32 and 512 steps are 65,536 and 1,048,576 tokens): 0.5x to 2x brackets clm's best at both ends of the
budgets and mdlm's at the largest, where 2x already fails.

    LMPT_THREADS=1 lmpt objective=O data=tinystories tokenizer.vocab_size=2048 model=micro \
      data.unique_tokens=1056896 trainer.max_steps=S scheduler.warmup_steps=S/10 trainer.seed=0 \
      trainer.eval_every=0 trainer.sample_tokens=0 optimizer.lr=0.04F optimizer.adamw_lr=0.02F \
      [objective.eval_draws=32, for mdlm]

    factor F          0.25    0.5     1       2       4
    clm,  32 steps    7.868   7.020   6.495   6.469   6.621
    clm,  512 steps   4.839   4.720   4.724   4.904   5.213
    mdlm, 32 steps    8.267   8.277   8.280   8.330   8.371
    mdlm, 512 steps   7.357   6.916   6.881   8.080   8.208

At scale=paper both objectives train on the paper's one recipe (AdamW 3e-4, constant after 2,500 warm-up steps,
dropout 0.1, bf16, batch 512 x 128), as Sahoo et al. trained theirs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from omegaconf import OmegaConf

from lmpt.config.schema import MuonConfig
from lmpt.errors import LmptError
from lmpt.reproduce.figures import count_text
from lmpt.reproduce.ladder import Shape, check_ladder, training_flops
from lmpt.reproduce.reproduction import (
    AR,
    CONF_DATA,
    DIFFUSION,
    TOKENS_PER_STEP,
    PlannedRun,
    Reproduction,
    Scale,
    corpus_keys,
    numbers,
)

OBJECTIVES = (AR, DIFFUSION)
PAPER_VOCAB = 30_522
"""Sahoo et al.'s vocabulary on LM1B: bert-base-uncased's pieces."""
SEQ_LEN = 128
"""The context of every run: Sahoo et al.'s on LM1B."""
LR_SWEEP: dict[str, tuple[float, ...]] = {AR: (0.5, 1.0, 2.0), DIFFUSION: (0.5, 1.0, 2.0)}
"""scale=laptop: each objective's factors on Muon's default peaks, every one trained in every cell (the docstring's
runs set them)."""
LAPTOP_EVAL_DRAWS = 32
"""mdlm's held-out bound at scale=laptop: 32 fixed draws of masks (a standard error near 0.01 bits, logged with each
run), half the default's evaluation time, which at the smallest budgets is most of a run's."""


@dataclass(frozen=True)
class Recipe:
    """How every run of a scale trains: the vocabulary, sequences a step, the keys both objectives share, each
    objective's own keys, and each objective's sweep of factors on Muon's peaks (empty: the keys hold one learning
    rate for both)."""

    vocab: int
    batch: int
    keys: tuple[str, ...]
    words: str
    """The recipe in a few words, for the conditions table."""
    sweep: dict[str, tuple[float, ...]] = field(default_factory=dict)
    objective_keys: dict[str, tuple[str, ...]] = field(default_factory=dict)
    warmup_cap: int = 0
    """Warm-up steps at most (0: a tenth of every run)."""

    def factors(self, objective: str) -> tuple[float | None, ...]:
        return self.sweep.get(objective, (None,))

    def warmup(self, steps: int) -> int:
        tenth = max(1, steps // 10)
        return min(tenth, self.warmup_cap) if self.warmup_cap else tenth

    @staticmethod
    def lr_keys(factor: float | None) -> tuple[str, ...]:
        """Muon's two peaks scaled by `factor` (None: the recipe's own keys hold the learning rate)."""
        if factor is None:
            return ()
        return (f"optimizer.lr={MuonConfig.lr * factor:g}", f"optimizer.adamw_lr={MuonConfig.adamw_lr * factor:g}")


RECIPES = {
    Scale.laptop: Recipe(
        2048,
        TOKENS_PER_STEP // SEQ_LEN,
        (),
        "lmpt's default: Muon, cosine decay to 30% after a tenth of the steps of warm-up, no dropout, fp32, batch "
        f"{TOKENS_PER_STEP // SEQ_LEN} x {SEQ_LEN}",
        sweep=LR_SWEEP,
        objective_keys={DIFFUSION: (f"objective.eval_draws={LAPTOP_EVAL_DRAWS}",)},
    ),
    Scale.paper: Recipe(
        PAPER_VOCAB,
        512,
        (
            "optimizer=adamw",
            "optimizer.lr=3e-4",
            "optimizer.betas=[0.9,0.999]",
            "optimizer.weight_decay=0.0",
            "scheduler=constant",
            "model.dropout=0.1",
            "trainer.amp=true",
            "trainer.ckpt_every=0",  # a checkpoint every trainer.ckpt_minutes, not every 100 of 500k steps
        ),
        "the paper's: AdamW 3e-4, constant after 2,500 warm-up steps, dropout 0.1, bf16, batch 512 x 128",
        warmup_cap=2500,
    ),
}
COMMON = ("trainer.eval_every=0", "trainer.sample_tokens=0")
CONF_MODEL = CONF_DATA.parent / "model"


@dataclass(frozen=True)
class GroupShape(Shape):
    """A ladder rung named by one of lmpt's model groups (conf/model/NAME.yaml): its own depth, heads and
    feed-forward, counted as Shape counts a width's."""

    group: str = ""
    depth: int = 1
    head_count: int = 1
    ffn_width: int = 1

    @property
    def label(self) -> str:
        return self.group

    @property
    def layers(self) -> int:
        return self.depth

    @property
    def heads(self) -> int:
        return self.head_count

    @property
    def ffn(self) -> int:
        return self.ffn_width

    def keys(self) -> tuple[str, ...]:
        return (f"model={self.group}",)


def ladder_shapes(entries: Sequence[str], vocab: int) -> list[Shape]:
    """The ladder's shapes, smallest first: each entry a width (lmpt.reproduce.ladder) or a model group's name; one
    LmptError line for anything else or a size named twice."""
    shapes: list[Shape] = []
    for entry in entries:
        if entry.isdecimal():
            shapes += check_ladder([int(entry)], vocab, SEQ_LEN)
        elif (CONF_MODEL / f"{entry}.yaml").is_file():
            cfg = OmegaConf.load(CONF_MODEL / f"{entry}.yaml")
            shapes.append(GroupShape(cfg.d_model, vocab, SEQ_LEN, entry, cfg.n_layers, cfg.n_heads, cfg.ffn_dim))
        else:
            groups = ", ".join(sorted(p.stem for p in CONF_MODEL.glob("*.yaml")))
            raise LmptError(f"ladder entry '{entry}' is neither a model width nor a model group ({groups})")
    labels = [s.label for s in shapes]
    twice = sorted({label for label in labels if labels.count(label) > 1})
    if twice:
        raise LmptError(f"ladder=[{','.join(entries)}] names {', '.join(twice)} twice: give each size once")
    return sorted(shapes, key=lambda s: s.parameters)


class GapGrid(Reproduction):
    """The grid the command's keys choose (corpus, ladder, budgets; `scales` gives their defaults) and the runs it
    plans; the reproduction (lmpt.reproduce.diffusion_gap.reproduction) adds what they show."""

    grid_keys: ClassVar[tuple[str, ...]] = ("corpus", "ladder", "budgets")
    scales: ClassVar[dict[Scale, dict[str, Any]]] = {
        Scale.laptop: {
            "corpus": ["tinystories"],
            "ladder": ["64", "128"],
            "budgets": ["65536", "131072", "262144", "524288", "1048576"],
            "seeds": 3,
        },
        Scale.paper: {
            "corpus": ["web-text/*.parquet"],
            "ladder": ["small", "base"],
            "budgets": ["33e9", "71e9", "153e9", "327e9"],
            "seeds": 3,
        },
    }

    def __init__(self, scale: Scale = Scale.laptop, seeds: int | None = None, **given: list[str]) -> None:
        super().__init__(scale, seeds, **given)
        if len(self.grid["corpus"]) != 1:
            raise LmptError(f"corpus=[{','.join(self.grid['corpus'])}]: {self.name} reads one corpus, give one")
        self.corpus = self.grid["corpus"][0]
        self.data_keys = corpus_keys(self.corpus)
        self.recipe = RECIPES[self.scale]
        self.ladder = ladder_shapes(self.grid["ladder"], self.recipe.vocab)
        per_step = self.recipe.batch * SEQ_LEN
        budgets = numbers(self, "budgets", float, least=per_step)
        self.steps = sorted({round(b / per_step) for b in budgets})
        given_budgets = ",".join(self.grid["budgets"])
        if len(self.steps) < len(budgets):
            raise LmptError(f"budgets=[{given_budgets}] name a budget twice at {per_step:,} tokens a step")
        if len(self.steps) < 2:
            raise LmptError(
                f"budgets=[{given_budgets}] is one budget: whether the gap narrows needs at least 2 (4 are usual)"
            )
        self.tokens = [steps * per_step for steps in self.steps]
        """Each budget's training tokens (positions predicted), ascending."""
        self.unique_tokens = self.steps[-1] * self.recipe.batch * (SEQ_LEN + 1) + SEQ_LEN
        """The text every run draws its windows from: the largest budget's windows of SEQ_LEN + 1 tokens, each once
        (lmpt.data.sampler: a pass visits every window once)."""

    def runs(self) -> list[PlannedRun]:
        planned = []
        for seed in range(self.seeds):
            cells = [
                (o, shape, steps, f)
                for shape in self.ladder
                for steps in self.steps
                for o in OBJECTIVES
                for f in self.recipe.factors(o)
            ]
            cells.sort(key=lambda c: -training_flops(c[1], c[0]) * c[2])  # longest first: the slots end together
            planned += [self._run(o, shape, steps, seed, factor) for o, shape, steps, factor in cells]
        return planned

    def _run(self, objective: str, shape: Shape, steps: int, seed: int, factor: float | None) -> PlannedRun:
        recipe = self.recipe
        tokens = steps * recipe.batch * SEQ_LEN
        lr = "" if factor is None else f"-lr{factor:g}x"
        keys = (
            f"objective={objective}",
            *self.data_keys,
            f"tokenizer.vocab_size={recipe.vocab}",
            *shape.keys(),
            f"data.unique_tokens={self.unique_tokens}",
            *((f"trainer.batch_size={recipe.batch}",) if recipe.batch * SEQ_LEN != TOKENS_PER_STEP else ()),
            f"trainer.max_steps={steps}",
            f"scheduler.warmup_steps={recipe.warmup(steps)}",
            f"trainer.seed={seed}",
            *recipe.keys,
            *recipe.lr_keys(factor),
            *recipe.objective_keys.get(objective, ()),
            *COMMON,
        )
        labels = {
            "objective": objective,
            "model": shape.label,
            "parameters": shape.parameters,
            "tokens": tokens,
            "factor": factor,
            "seed": seed,
        }
        flops = training_flops(shape, objective) * tokens
        name = f"{shape.label}-{count_text(tokens)}-{objective}{lr}-seed{seed}"
        return PlannedRun(name, keys, labels, flops, 6.0 * shape.parameters * tokens)
