"""Masked diffusion's likelihood gap to autoregression narrows as training tokens grow (Sahoo et al. 2024, Tables 1
and 2; Nie et al. 2024: about 16 times the compute to match).

The grid: clm and mdlm on the same text at a ladder of model sizes, each trained once per token budget (a run per
budget, its schedule spanning it), over `seeds` seeds. Every run reads its tokens once: all draw their windows from
the same first U tokens of the corpus (data.unique_tokens), U what the largest budget reads, so no run repeats a
window and a larger budget reads more of the text. Both objectives are measured on the same held-out windows in bits
per token: clm's exact negative log-likelihood, mdlm's diffusion bound (an upper bound on its own). The seed fixes a
run's windows, so clm and mdlm of one seed read the same text and the gap is paired by seed.

Each objective at its own learning rate, searched in every cell. At scale=laptop every (size, budget, objective) is
trained at each factor of its sweep (LR_SWEEP: one factor scales both of Muon's peaks, optimizer.lr and
optimizer.adamw_lr) and the cell's figure is its best factor's (the lowest mean over seeds); the document lists every
factor's figure and names the cells whose best may lie beyond the sweep (Cell.at_an_end: then the condition
"learning rate" is missed). Choosing from the grid's own runs needs no second phase (lmpt.reproduce.grid plans every
run before any starts), and one search at the smallest budget would not do: the best factor moves with the budget,
and at the smallest mdlm has not yet left predicting each token's frequency at any factor.
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
dropout 0.1, bf16, batch 512 x 128), as Sahoo et al. trained theirs.

What is measured, per size and budget: the gap mdlm - clm in bits per token and relative to clm's figure, with 95% t
intervals over seeds; per size, whether it narrows (each seed's least-squares slope of the relative gap against log10
tokens, the slopes' interval: below 0 shows narrowing); and the compute multiplier at which mdlm's bound reaches
clm's figure at the smallest budget (mdlm's curve interpolated in log tokens: at one model size the ratio of 6ND
compute), "beyond the grid" when it never does."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from matplotlib.figure import Figure
from omegaconf import OmegaConf

from lmpt.config.schema import MuonConfig
from lmpt.downstream.significance import seed_interval
from lmpt.errors import LmptError
from lmpt.objectives.mdlm import MdlmConfig
from lmpt.objectives.yardstick import BITS_PER_TOKEN
from lmpt.report.markdown import markdown_table
from lmpt.reproduce.ladder import TOKENS_PER_PARAMETER, Shape, check_ladder
from lmpt.reproduce.reproduction import (
    AR,
    CONF_DATA,
    DIFFUSION,
    TOKENS_PER_STEP,
    Findings,
    FinishedRun,
    PlannedRun,
    Reproduction,
    Scale,
    corpus_keys,
    interval,
    mean_cell,
    numbers,
)
from lmpt.reproduce.verdict import ClaimVerdict, Condition, Evidence, below, judge, within_margin

OBJECTIVES = (AR, DIFFUSION)
PAPER_PERPLEXITY = {33e9: {AR: 22.32, DIFFUSION: 27.04}, 327e9: {AR: 20.86, DIFFUSION: 23.00}}
"""LM1B test perplexity at 33B and 327B training tokens (Sahoo et al. 2024, Table 1: their retrained autoregressive
transformer, and MDLM's bound)."""
PAPER_PARAMETERS = 110e6
"""Sahoo et al.'s LM1B models: about 110M parameters (12 blocks of width 768, bert-base-uncased's embedding)."""
PAPER_NON_EMBEDDING = 12 * 12 * 768**2
"""Their blocks' matrices: 12 blocks of 4 d^2 (attention) and 8 d^2 (a 4 d feed-forward) at d = 768."""
PAPER_VOCAB = 30_522
NIE_MULTIPLIER = 16.0
"""Nie et al. 2024: masked diffusion needs about 16 times autoregression's compute for the same validation loss."""
ABOUT = 2.0
""""About 16 times": within a factor of 2 (8x to 32x)."""
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


def training_flops(shape: Shape, objective: str) -> float:
    """Training FLOPs a token as lmpt counts them: mdlm's head runs on its masked tokens alone, on average (1 + eps)
    / 2 of them (lmpt.objectives.mdlm's expected_loss_fraction)."""
    unmasked = 1.0 - (1.0 + MdlmConfig.eps) / 2.0 if objective == DIFFUSION else 0.0
    return shape.flops_per_token - 6.0 * shape.width * shape.vocab * unmasked


def count_text(tokens: float) -> str:
    """A count in a few characters: 65.5k, 1.05M, 33B."""
    for size, unit in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if tokens >= size:
            return f"{tokens / size:.3g}{unit}"
    return f"{tokens:.0f}"


def paper_gap(tokens: float) -> tuple[float, float]:
    """The paper's (gap in bits per token, gap relative to AR's bits) at `tokens`."""
    ar, mdlm = (math.log2(PAPER_PERPLEXITY[tokens][o]) for o in OBJECTIVES)
    return mdlm - ar, (mdlm - ar) / ar


def paper_slope() -> float:
    """The paper's relative gap (in bits), its change per tenfold tokens between its two budgets (% points)."""
    t0, t1 = sorted(PAPER_PERPLEXITY)
    return 100 * (paper_gap(t1)[1] - paper_gap(t0)[1]) / math.log10(t1 / t0)


def slope(tokens: Sequence[float], relative: Sequence[float]) -> float:
    """Least-squares slope of the relative gap (% points) against log10 tokens."""
    return float(np.polyfit(np.log10(np.asarray(tokens, dtype=float)), 100 * np.asarray(relative), 1)[0])


def multiplier(target: float, tokens: Sequence[float], curve: Sequence[float]) -> float | None:
    """The tokens at which `curve` (mdlm's bits at each of `tokens`, ascending) first reaches `target`, over the
    smallest of `tokens`, interpolated linearly in log tokens; 1 when it is there at the smallest, None when it never
    is inside the grid."""
    if curve[0] <= target:
        return 1.0
    for i in range(1, len(tokens)):
        if curve[i] <= target:
            share = (curve[i - 1] - target) / (curve[i - 1] - curve[i])
            return math.exp(share * math.log(tokens[i] / tokens[i - 1])) * tokens[i - 1] / tokens[0]
    return None


def _papers_figures() -> str:
    rows = []
    for tokens, cell in sorted(PAPER_PERPLEXITY.items()):
        gap, relative = paper_gap(tokens)
        rows.append(
            [
                count_text(tokens),
                f"{cell[AR]:.2f} ({math.log2(cell[AR]):.3f} bits)",
                f"≤ {cell[DIFFUSION]:.2f} ({math.log2(cell[DIFFUSION]):.3f} bits)",
                f"{cell[DIFFUSION] / cell[AR] - 1:+.1%}",
                f"{gap:+.3f} bits, {relative:+.1%}",
            ]
        )
    header = ["training tokens", "AR perplexity", "MDLM bound", "perplexity ratio - 1", "gap in bits per token"]
    return "\n".join(
        [
            "Sahoo et al. 2024, Table 1 (LM1B's test set, bert-base-uncased tokens, context 128, about 110M "
            "parameters):",
            "",
            *markdown_table(header, rows),
            "",
            f"The relative gap in bits falls by {-paper_slope():.1f} percentage points per tenfold tokens between the "
            "two budgets. Nie et al. 2024 fit scaling laws to both on SlimPajama (models up to 1.1B parameters, "
            f"compute-optimal frontiers): masked diffusion needs about {NIE_MULTIPLIER:g} times autoregression's "
            "compute for the same validation loss.",
        ]
    )


Bits = dict[tuple[str, int, str, float | None, int], float]
"""(size, tokens, objective, factor, seed) -> held-out bits per token of a completed run."""


@dataclass(frozen=True)
class Cell:
    """One size, budget and objective: each factor's held-out figure by seed (a factor of None: the recipe's one
    learning rate), and the best factor, the lowest mean over the seeds it has."""

    by_factor: dict[float | None, dict[int, float]]

    @property
    def best(self) -> float | None:
        done = {f: seeds for f, seeds in self.by_factor.items() if seeds}
        return min(done, key=lambda f: statistics.fmean(done[f].values())) if done else None

    @property
    def figures(self) -> dict[int, float]:
        """The best factor's figure by seed (empty: no run completed)."""
        return self.by_factor[self.best] if self.by_factor and self.best in self.by_factor else {}

    @property
    def at_an_end(self) -> bool:
        """The best factor is an end of the sweep and beats its neighbour with a paired 95% interval over seeds
        below 0 (or with no interval, one seed): the best may lie beyond. A best at an end by no more than the seeds'
        spread, as where a model has not yet left predicting each token's frequency, is not."""
        factors = sorted(f for f in self.by_factor if f is not None)
        best = self.best
        if len(factors) < 2 or best not in (factors[0], factors[-1]):
            return False
        neighbour = self.by_factor[factors[1] if best == factors[0] else factors[-2]]
        differences = [v - neighbour[s] for s, v in self.by_factor[best].items() if s in neighbour]
        span = seed_interval(differences)
        return span is None or span[1] < 0


Pairs = dict[int, tuple[float, float]]
"""seed -> (clm's bits, mdlm's bits) of one size and budget, each at its cell's best factor."""
NEEDS = (
    "non-embedding parameters",
    "training tokens",
    "tokens per parameter (compute-optimal: about 20)",
    "learning rate",
)
"""The conditions both claims depend on (the multiplier's also on the sizing)."""


class DiffusionGap(Reproduction):
    name: ClassVar[str] = "diffusion-gap"
    title: ClassVar[str] = "masked diffusion's likelihood gap to autoregression as training tokens grow (Sahoo 2024)"
    paper: ClassVar[str] = (
        'Sahoo, Arriola, Schiff, Gokaslan, Marroquin, Chiu, Rush and Kuleshov (2024), "Simple and Effective Masked '
        'Diffusion Language Models", arXiv:2406.07524; with Nie et al. (2024), "Scaling up Masked Diffusion Models '
        'on Text", arXiv:2410.18514'
    )
    claim: ClassVar[str] = (
        "Masked diffusion's likelihood gap to autoregression narrows as training tokens grow: Sahoo et al., Tables 1 "
        "and 2, MDLM's perplexity bound on LM1B 27.04 against AR's 22.32 at 33B tokens and 23.00 against 20.86 at "
        "327B; Nie et al.: masked diffusion matches autoregression at about 16 times the compute."
    )
    papers_figures: ClassVar[str] = _papers_figures()
    cost_note: ClassVar[str] = (
        "scale=laptop is what 2 CPU cores finish in about 90 minutes, one thread a run; the dry run "
        "(`lmpt-reproduce diffusion-gap dry_run=true`) states every run, its FLOPs and the time before anything "
        "starts, and `max_minutes` refuses a longer plan. `ladder`, `budgets`, `corpus` and `seeds` change the grid; "
        "a budget the text cannot hold once is refused, saying how much text it needs. scale=paper plans Sahoo et "
        "al.'s LM1B configuration (the model groups small and base, the largest about 110M parameters, a 30,522-piece "
        "vocabulary, 128 tokens of context, 33B to 327B tokens at batch 512, the paper's recipe) on a corpus that can "
        "give 327B tokens once (`corpus=`: LM1B holds about 0.8B words, which the paper reads many times); its dry "
        "run prints the GPU-hours, and it runs where GPUs (device=gpu) or SLURM (launcher=slurm) are."
    )
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

    # -- analysis ---------------------------------------------------------------------------------------------------
    def analyse(self, finished: list[FinishedRun]) -> Findings:
        bits = _bits(finished)
        best = {
            (s.label, t, o): self._cell(bits, s.label, t, o)
            for s in self.ladder
            for t in self.tokens
            for o in OBJECTIVES
        }
        conditions = self._conditions(best)
        needs = [c for c in conditions if c.name in NEEDS]
        sizing = [*needs, *(c for c in conditions if c.name == "sizing")]
        claims, gap_rows, slope_rows, multiplier_rows, headline = [], [], [], [], []
        for shape in self.ladder:
            label = shape.label
            planned = [r for r in self.runs() if r.labels["model"] == label]
            missing = [r.name for r in planned if _key(r.labels) not in bits]
            cells = {t: _pairs(best[label, t, AR].figures, best[label, t, DIFFUSION].figures) for t in self.tokens}
            gap_rows += [_gap_row(shape, t, cells[t]) for t in self.tokens]
            complete = [s for s in range(self.seeds) if all(s in cells[t] for t in self.tokens)]
            slopes = [slope(self.tokens, [_relative(*cells[t][s]) for t in self.tokens]) for s in complete]
            narrowing = self._narrowing(label, slopes, missing, needs)
            mean = mean_cell(slopes, "+.2f")
            each = ", ".join(f"{v:+.2f}" for v in slopes) or "—"
            slope_rows.append([label, each, mean, f"{paper_slope():+.2f}", narrowing.word])
            claims += [narrowing, self._multiplier(label, cells, missing, sizing)]
            multiplier_rows += [self._multiplier_row(label, t, cells) for t in self.tokens[:-1]]
            ends = [cells[t] for t in (self.tokens[0], self.tokens[-1])]
            if all(ends):
                rise = [statistics.fmean(_relative(*p) for p in end.values()) for end in ends]
                headline.append(f"{label} {rise[0]:+.0%} to {rise[1]:+.0%}")
        sections = [
            ("The grid", self._grid_text()),
            ("The gap, per size and budget", _GAP_NOTE + "\n\n" + "\n".join(markdown_table(_GAP_HEADER, gap_rows))),
            ("Does it narrow?", _SLOPE_NOTE + "\n\n" + "\n".join(markdown_table(_SLOPE_HEADER, slope_rows))),
            (
                "The compute multiplier",
                self._multiplier_note() + "\n\n" + "\n".join(markdown_table(_MULTIPLIER_HEADER, multiplier_rows)),
            ),
            *self._sweep_section(best),
            ("Every run", _every_run(finished)),
        ]
        words = "mdlm's bound over clm's figure, smallest to largest budget: " + ", ".join(headline)
        return Findings(claims, conditions, words if headline else "no runs yet", sections, self._plot(best))

    def _cell(self, bits: Bits, label: str, tokens: int, objective: str) -> Cell:
        return Cell(
            {
                f: {s: bits[k] for s in range(self.seeds) if (k := (label, tokens, objective, f, s)) in bits}
                for f in self.recipe.factors(objective)
            }
        )

    def _narrowing(self, label: str, slopes: list[float], missing: list[str], needs: list[Condition]) -> ClaimVerdict:
        claim = f"the gap narrows as tokens grow ({label})"
        if missing:
            return judge(claim, Evidence.missing, "", needs, _missing_text(missing))
        mean, low, high = interval(slopes)
        span = f"[{low:+.2f}, {high:+.2f}]" if len(slopes) > 1 else "(one seed: no interval)"
        figure = f"relative gap {mean:+.2f} points per tenfold tokens {span}"
        return judge(claim, below(low, high, 0.0), figure, needs, f"the paper's {paper_slope():+.2f} points")

    def _multiplier(
        self, label: str, cells: dict[int, Pairs], missing: list[str], needs: list[Condition]
    ) -> ClaimVerdict:
        """Nie et al.'s claim at one size, from clm's smallest budget: about 16x, within a factor of ABOUT, read off
        the interval of the log multiplier over seeds (beyond the grid: above the grid's reach)."""
        claim = f"mdlm matches clm at about {NIE_MULTIPLIER:g}x the compute ({label})"
        if missing:
            return judge(claim, Evidence.missing, "", needs, _missing_text(missing))
        found, reach, figure = self._multipliers(cells, self.tokens[0])
        reached = [math.log(m / NIE_MULTIPLIER) for m in found if m is not None]
        if len(reached) == len(found):
            _, low, high = interval(reached)
            evidence = within_margin(low, high, math.log(ABOUT))
        elif not reached and reach > ABOUT * NIE_MULTIPLIER:
            evidence = Evidence.contradicts  # more than the grid's reach, past "about 16x" for every seed
        else:
            evidence = Evidence.undecided
        return judge(
            claim, evidence, figure, needs, f"about: {NIE_MULTIPLIER / ABOUT:g}x to {NIE_MULTIPLIER * ABOUT:g}x"
        )

    def _multipliers(self, cells: dict[int, Pairs], tokens: int) -> tuple[list[float | None], float, str]:
        """Each seed's multiplier from clm's figure at `tokens` along its mdlm curve from there on (None: beyond the
        grid), the grid's reach from `tokens`, and the figure in words: the geometric mean with its 95% t interval."""
        later = [t for t in self.tokens if t >= tokens]
        seeds = [s for s in range(self.seeds) if all(s in cells[t] for t in later)]
        found = [multiplier(cells[tokens][s][0], later, [cells[t][s][1] for t in later]) for s in seeds]
        reach = later[-1] / tokens
        reached = [math.log(m) for m in found if m is not None]
        if not found:
            return found, reach, "—"
        if len(reached) < len(found):
            return found, reach, f"beyond the grid's {reach:g}x for {len(found) - len(reached)} of {len(found)} seeds"
        mean, low, high = interval(reached)
        span = f" [{math.exp(low):.2f}, {math.exp(high):.2f}]" if math.isfinite(low) else " (one seed: no interval)"
        return found, reach, f"{math.exp(mean):.2f}x{span}"

    def _multiplier_row(self, label: str, tokens: int, cells: dict[int, Pairs]) -> list[str]:
        found, _, figure = self._multipliers(cells, tokens)
        each = ", ".join("beyond" if m is None else f"{m:.2f}x" for m in found) or "—"
        return [label, count_text(tokens), each, figure]

    def _multiplier_note(self) -> str:
        return (
            "How many times clm's tokens mdlm needs to reach clm's held-out figure at a budget: along each seed's "
            "mdlm curve from that budget on, interpolated linearly in log tokens (at one model size the ratio of 6ND "
            "compute; lmpt's count gives mdlm a little less, its head running on masked tokens alone). The grid "
            f"reaches {self.tokens[-1] / self.tokens[0]:g}x from its smallest budget; 'beyond' when mdlm's bound "
            "never gets there."
        )

    def _edges(self, best: dict[tuple[str, int, str], Cell]) -> list[str]:
        """The cells whose best factor may lie beyond their sweep (Cell.at_an_end)."""
        return [f"{label} {count_text(t)} {o} {cell.best:g}x" for (label, t, o), cell in best.items() if cell.at_an_end]

    def _sweep_section(self, best: dict[tuple[str, int, str], Cell]) -> list[tuple[str, str]]:
        if not self.recipe.sweep:
            return []
        factors = sorted({f for o in OBJECTIVES for f in LR_SWEEP[o]})
        rows = []
        for (label, tokens, objective), cell in best.items():
            chosen = cell.best
            cells = []
            for f in factors:
                values = list(cell.by_factor.get(f, {}).values())
                text = mean_cell(values) if f in LR_SWEEP[objective] else ""
                cells.append(f"**{text}**" if f == chosen and values else text)
            rows.append([label, count_text(tokens), objective, *cells])
        header = ["size", "tokens", "objective", *(f"{f:g}x" for f in factors)]
        note = (
            "Held-out bits per token of every factor of each cell's sweep (mean over seeds [95% t]); each factor "
            f"scales both of Muon's peaks (optimizer.lr {MuonConfig.lr:g}, optimizer.adamw_lr "
            f"{MuonConfig.adamw_lr:g} at 1x). In bold, the cell's best, whose runs the tables above use. Where the "
            "best is an end of the sweep and beats its neighbour with a paired interval below 0, it may lie beyond: "
            + (", ".join(self._edges(best)) or "none")
            + "."
        )
        return [("Each objective's learning rate", note + "\n\n" + "\n".join(markdown_table(header, rows)))]

    def _conditions(self, best: dict[tuple[str, int, str], Cell]) -> list[Condition]:
        params = [s.parameters for s in self.ladder]
        inner = [s.matmul_parameters for s in self.ladder]
        lo_t, hi_t = min(PAPER_PERPLEXITY), max(PAPER_PERPLEXITY)
        per_param = "; ".join(
            f"{s.label} {self.tokens[0] / s.parameters:.2g} to {self.tokens[-1] / s.parameters:.2g}"
            for s in self.ladder
        )
        trained = all(self.tokens[-1] >= TOKENS_PER_PARAMETER * p for p in params)
        draws = LAPTOP_EVAL_DRAWS if self.scale is Scale.laptop else MdlmConfig.eval_draws
        windows = self.steps[-1] * self.recipe.batch * (SEQ_LEN + 1)
        if self.recipe.sweep:
            edges = self._edges(best)
            chosen = all(cell.best is not None for cell in best.values())
            sweeps = ", ".join(f"{o} " + "/".join(f"{f:g}" for f in LR_SWEEP[o]) for o in OBJECTIVES)
            rate = (
                f"each its own, the best of {sweeps}x Muon's defaults in every cell; at an end of its sweep in "
                f"{len(edges)} of {len(best)} cells"
            )
            rate_met = (not edges) if chosen else None
        else:
            rate, rate_met = "the paper's, one for both", None
        return [
            Condition("parameters", f"about {count_text(PAPER_PARAMETERS)}", _sizes(self.ladder, params), None),
            Condition(
                "non-embedding parameters",
                f"about {count_text(PAPER_NON_EMBEDDING)}",
                _sizes(self.ladder, inner),
                max(inner) >= PAPER_NON_EMBEDDING / 2,
            ),
            Condition(
                "training tokens",
                f"{count_text(lo_t)} and {count_text(hi_t)}",
                f"{count_text(self.tokens[0])} to {count_text(self.tokens[-1])} ({len(self.tokens)} budgets)",
                self.tokens[-1] >= lo_t,
            ),
            Condition(
                "tokens per parameter (compute-optimal: about 20)",
                f"{lo_t / PAPER_PARAMETERS:,.0f} to {hi_t / PAPER_PARAMETERS:,.0f}: far past compute-optimal",
                per_param,
                trained,
                "" if trained else "no model is trained to compute-optimal at the largest budget",
            ),
            Condition("vocabulary", f"{PAPER_VOCAB:,} (bert-base-uncased)", f"{self.recipe.vocab:,}", None),
            Condition("context length", "128 tokens", f"{SEQ_LEN} tokens", SEQ_LEN == 128),
            Condition(
                "documents",
                "LM1B's sentences (about 27 words), one an example, padded to 128",
                f"the documents of corpus={self.corpus} packed into {SEQ_LEN}-token windows, eos between",
                None,
            ),
            Condition(
                "passes over the text",
                "many: LM1B holds about 0.8B words",
                f"one: every run draws from the first {self.unique_tokens:,} tokens, the largest budget reads its "
                f"{windows:,} windowed tokens once",
                None,
                "repetition cannot enter the gap",
            ),
            Condition(
                "recipe",
                "AdamW 3e-4, constant after 2,500 warm-up steps, dropout 0.1, EMA 0.9999, batch 512 x 128",
                self.recipe.words,
                None,
            ),
            Condition("learning rate", "one for both (3e-4)", rate, rate_met),
            Condition(
                "what the loss is measured on",
                "LM1B's test set: AR exact, MDLM its ELBO bound",
                f"the same held-out windows, bits per token: clm exact, mdlm its bound ({draws} fixed draws of masks)",
                True,
            ),
            Condition(
                "sizing",
                "Nie et al.: compute-optimal frontiers over model sizes",
                f"{len(self.ladder)} fixed size(s), a curve each",
                False,
                "a multiplier at one size, not on a frontier",
            ),
        ]

    def _grid_text(self) -> str:
        rows = [
            [
                s.label,
                str(s.width),
                str(s.layers),
                f"{s.parameters:,}",
                f"{s.matmul_parameters:,}",
                f"{training_flops(s, AR):.3g} / {training_flops(s, DIFFUSION):.3g}",
            ]
            for s in self.ladder
        ]
        header = ["size", "width", "layers", "parameters", "non-embedding", "FLOPs a token (clm / mdlm)"]
        budgets = ", ".join(f"{count_text(t)} ({s:,} steps)" for t, s in zip(self.tokens, self.steps, strict=True))
        return "\n".join(
            [
                f"corpus={self.corpus} (`{' '.join(self.data_keys)}`), a {self.recipe.vocab:,}-piece tokenizer, "
                f"{SEQ_LEN}-token windows, {self.recipe.batch} a step; budgets {budgets}; {self.seeds} seed(s); every "
                f"run draws from the first {self.unique_tokens:,} tokens of the text. Recipe: {self.recipe.words}.",
                "",
                *markdown_table(header, rows),
            ]
        )

    def _plot(self, best: dict[tuple[str, int, str], Cell]) -> Figure:
        figure = Figure(figsize=(11, 4.4), layout="constrained")
        left, right = figure.subplots(1, 2)
        for i, shape in enumerate(self.ladder):
            for objective, style in zip(OBJECTIVES, ("-", "--"), strict=True):
                cells = [(t, best[shape.label, t, objective].figures) for t in self.tokens]
                points = [(t, statistics.fmean(figures.values())) for t, figures in cells if figures]
                name = f"{shape.label} {objective}" + (" (bound)" if objective == DIFFUSION else "")
                if points:
                    left.plot(*zip(*points, strict=True), style, marker="o", color=f"C{i}", label=name)
            xs, ys, errs = [], [], []
            for tokens in self.tokens:
                pairs = _pairs(best[shape.label, tokens, AR].figures, best[shape.label, tokens, DIFFUSION].figures)
                if pairs:
                    mean, _, high = interval([100 * _relative(*p) for p in pairs.values()])
                    xs.append(tokens)
                    ys.append(mean)
                    errs.append(high - mean if math.isfinite(high) else 0.0)
            right.errorbar(xs, ys, yerr=errs, marker="o", capsize=3, color=f"C{i}", label=f"{shape.label} (95% t)")
        paper = sorted(PAPER_PERPLEXITY)
        right.plot(paper, [100 * paper_gap(t)[1] for t in paper], "s:", color="black", label="Sahoo et al., LM1B")
        right.axhline(0, color="grey", lw=0.8)
        for ax in (left, right):
            ax.set_xscale("log")
            ax.set_xlabel("training tokens")
            ax.grid(alpha=0.3)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=7)
        left.set_ylabel("held-out bits per token")
        right.set_ylabel("mdlm's bound over clm's figure (% of clm's bits)")
        figure.suptitle("The likelihood gap of masked diffusion to autoregression, each token read once", fontsize=11)
        return figure


def _key(labels: dict) -> tuple:
    return (labels["model"], labels["tokens"], labels["objective"], labels["factor"], labels["seed"])


def _bits(finished: list[FinishedRun]) -> Bits:
    """Every completed run's held-out bits per token (a run without a finite figure is left out)."""
    found = {_key(run.planned.labels): run.last(BITS_PER_TOKEN) for run in finished}
    return {key: value for key, value in found.items() if math.isfinite(value)}


def _pairs(ar: dict[int, float], diffusion: dict[int, float]) -> Pairs:
    return {s: (ar[s], diffusion[s]) for s in sorted(ar) if s in diffusion}


def _relative(ar: float, diffusion: float) -> float:
    return (diffusion - ar) / ar


def _sizes(ladder: list[Shape], counts: list[int]) -> str:
    return ", ".join(f"{s.label} {count_text(n)}" for s, n in zip(ladder, counts, strict=True))


def _missing_text(names: list[str]) -> str:
    more = f" and {len(names) - 4} more" if len(names) > 4 else ""
    return f"runs not completed: {', '.join(names[:4])}{more}"


def _gap_row(shape: Shape, tokens: int, pairs: Pairs) -> list[str]:
    ar, dm = [p[0] for p in pairs.values()], [p[1] for p in pairs.values()]
    gaps = [d - a for a, d in zip(ar, dm, strict=True)]
    return [
        shape.label,
        count_text(tokens),
        f"{tokens / shape.parameters:.2g}",
        str(len(pairs)),
        mean_cell(ar),
        mean_cell(dm),
        mean_cell(gaps, "+.3f"),
        mean_cell([100 * g / a for g, a in zip(gaps, ar, strict=True)], "+.1f"),
        mean_cell([100 * (2**g - 1) for g in gaps], "+.0f"),
    ]


_GAP_HEADER = [
    "size",
    "tokens",
    "tokens a parameter",
    "seeds",
    "clm bits per token",
    "mdlm bound",
    "gap (bits)",
    "relative gap (%)",
    "perplexity ratio - 1 (%)",
]
_GAP_NOTE = (
    "Mean over seeds with its 95% t interval, each objective at its cell's best factor; the gap and the relative gap "
    "are paired by seed (clm and mdlm of a seed read the same windows). Relative gap: mdlm's bound over clm's figure "
    "minus 1, in bits per token; the perplexity ratio is 2 to the gap, the form of the paper's 21% and 10%."
)
_SLOPE_HEADER = ["size", "each seed's slope", "mean [95% t]", "the paper's", "verdict"]
_SLOPE_NOTE = (
    "Each seed's least-squares slope of the relative gap (percentage points) against log10 of the training tokens, "
    "over every budget; the interval is over seeds. Below 0 at 95%: the gap narrows. The paper's figure is the change "
    "between its two budgets per tenfold tokens."
)
_MULTIPLIER_HEADER = ["size", "clm's budget", "each seed", "geometric mean [95% t]"]


def _every_run(finished: list[FinishedRun]) -> str:
    rows = []
    for run in sorted(finished, key=lambda r: r.planned.name):
        labels, stderr = run.planned.labels, run.last("val_bits_per_token_stderr")
        lr = next((k.split("=", 1)[1] for k in run.planned.keys if k.startswith("optimizer.lr=")), "—")
        bound = labels["objective"] == DIFFUSION and math.isfinite(stderr)
        figure = f"{run.last('val_bits_per_token'):.4f}" + (f" ± {stderr:.4f}" if bound else "")
        rows.append(
            [
                run.planned.name,
                labels["objective"],
                labels["model"],
                f"{labels['tokens']:,}",
                str(labels["seed"]),
                lr,
                figure,
                f"{run.last('flops'):.3g}",
            ]
        )
    header = ["run", "objective", "size", "tokens", "seed", "optimizer.lr", "held-out bits per token", "FLOPs"]
    note = "Each run's final held-out figure (mdlm's with the standard error of its draws of masks)."
    return note + "\n\n" + "\n".join(markdown_table(header, rows))
