"""When masked diffusion overtakes autoregression on repeated data (Prabhudesai et al. 2025, "Diffusion Beats
Autoregressive in Data-Constrained Settings", arXiv:2507.15857): the compute at which mdlm's frontier first falls below
clm's, per count of unique tokens U, beside the paper's law C_crit(U) = 2.12e15 (U / 1e6)^2.174 FLOPs.

Done the paper's way:
- a frontier, as the paper's Figure 1: at each compute, the best held-out loss of any model size and epoch count
  trained with at most that compute;
- compute-optimal sizes: every budget (D = U x epochs training tokens) trains the ladder's model nearest its
  compute-optimal size (D / 20 parameters, lmpt.reproduce.ladder) and the rung either side of it, so that the frontier
  runs over sizes and each budget's compute-optimal model is on it;
- the paper's recipe for both objectives (the paper and its repository's training scripts): AdamW, weight decay 0.1,
  dropout 0.1, cosine decay to 10% of the peak learning rate after a 1% warm-up (`RECIPE`);
- compute counted as the paper counts it, 6 N D with N the parameters with the embedding; lmpt's own count (the
  attention and the head's share of positions too) is stated beside it and never compared with the law.

A run is planned when its 6 N D is at most CAP_FACTOR times the law's C_crit(U): the grid reaches past the crossing the
paper predicts. Every run is ranked by held-out bits per token on the same windows: exact for clm, the diffusion bound
for mdlm (an upper bound, so a crossing found with it is one the exact likelihood would find no later).

The claims, each judged by lmpt.reproduce.verdict.judge: at each U, "mdlm's frontier crosses below clm's near
C_crit(U)" (within a factor NEAR); over two or more U, "the critical compute grows as U^2.174". A grid that misses
the paper's conditions (models of 7M to 2.5B parameters, U of 25M to 100M, compute-optimal sizes, the recipe, compute
past the law) and finds no crossing is inconclusive at this scale: Ni et al. 2025 ("Training Optimal Large Diffusion
Language Models") find the crossover comes later for smaller models."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from lmpt.config.schema import DataConfig
from lmpt.downstream.significance import seed_interval
from lmpt.errors import LmptError
from lmpt.objectives.mdlm import MdlmConfig
from lmpt.objectives.yardstick import BITS_PER_TOKEN
from lmpt.report.markdown import markdown_table
from lmpt.reproduce.ladder import Shape, check_ladder, optimal_parameters
from lmpt.reproduce.reproduction import (
    AR,
    DIFFUSION,
    Findings,
    FinishedRun,
    PlannedRun,
    Reproduction,
    Scale,
    bound_note,
    corpus_keys,
    mean_cell,
    numbers,
)
from lmpt.reproduce.verdict import ClaimVerdict, Condition, Evidence, judge, within_margin

OBJECTIVES = (AR, DIFFUSION)
LAW = (2.12e15, 2.174)
"""C_crit(U) = a (U / 1e6)^k FLOPs in 6 N D (Prabhudesai et al. 2025, the project page's linear fit of critical
compute)."""
NEAR = 3.0
"""A crossing within this factor of the law's C_crit(U) (either side) is near it."""
REACH = 3.0
"""How far past C_crit(U) (6 N D, in multiples of it) a grid must reach for "no crossing" to count against the law."""
CAP_FACTOR = 8.0
"""A run is planned when its 6 N D is at most this times the law's C_crit(U)."""
EXPONENT_MARGIN = 0.5
"""The exponent of C_crit(U) fitted through lmpt's crossings agrees with the law's when its interval lies within this
of 2.174 (over a fourfold span of U, a factor of 2 in C_crit)."""
SIZING_FACTOR = 2.0
"""A budget has its compute-optimal size when a model it trains is within this factor of D / 20 parameters."""
NEIGHBOURS = 1
"""Rungs of the ladder either side of each budget's compute-optimal one that it trains too."""
MAX_UNIQUE = 1e13
"""More unique tokens than this (ten trillion, past any corpus) are refused."""
MAX_WIDTH = 65_536
"""A wider ladder rung (about 10^14 parameters in this shape) is refused."""
LADDER = (16, 32, 64, 128)
"""scale=laptop's model widths: about 0.04M, 0.08M, 0.24M (micro) and 1.1M parameters at a 2,048-piece vocabulary."""
PAPER_PARAMETERS = (7e6, 2.5e9)
PAPER_UNIQUE = (25e6, 100e6)
PAPER_EPOCHS = 800
PAPER_RECIPE = (
    "AdamW (0.9, 0.95), lr 2e-4 at 256 x 2,048 tokens a step, weight decay 0.1, dropout 0.1, cosine to 10% of the "
    "peak after a 1% warm-up, the same for both objectives"
)
RECIPE = {
    "optimizer": "adamw",
    "optimizer.weight_decay": "0.1",
    "model.dropout": "0.1",
    "scheduler": "cosine",
    "scheduler.min_lr_ratio": "0.1",
}
"""The paper's recipe as lmpt keys, for both objectives (AdamW's betas (0.9, 0.95) and gradient clipping at 1.0 are
lmpt's defaults); the warm-up, 1% of the steps, is each run's own key (`WARMUP_SHARE`)."""
WARMUP_SHARE = 0.01
COMMON = ("trainer.eval_every=0", "trainer.sample_tokens=0")


@dataclass(frozen=True)
class Setting:
    """What a scale fixes beside its grid keys: the tokenizer, the context and batch, the peak learning rate and the
    precision."""

    vocab: int
    seq_len: int
    batch: int
    accum: int
    lr: float
    """The peak learning rate of both objectives (the paper's 2e-4 is for its batch of 256 x 2,048 tokens)."""
    tokenizer: str
    precision: str

    @property
    def tokens_per_step(self) -> int:
        return self.seq_len * self.batch * self.accum

    def keys(self) -> tuple[str, ...]:
        return (
            f"tokenizer={self.tokenizer}",
            f"tokenizer.vocab_size={self.vocab}",
            f"data.seq_len={self.seq_len}",
            f"trainer.batch_size={self.batch}",
            f"trainer.grad_accum={self.accum}",
            f"trainer.precision={self.precision}",
            f"optimizer.lr={self.lr:g}",
        )


SETTINGS = {
    Scale.laptop: Setting(2048, 128, 16, 1, 3e-3, "sentencepiece", "fp32"),
    Scale.paper: Setting(50257, 2048, 32, 8, 2e-4, "bytelevel", "bf16"),
}
"""laptop: lmpt's default context and batch, fp32 (bf16 does not pay on a CPU at these widths), one peak learning rate
for both objectives as the paper's, 3e-3: with this recipe at widths 16 and 64 (40,000 unique tokens, 16 epochs), it
was the best or within 0.01 bits of the best of 1e-3, 3e-3 and 1e-2 for clm and mdlm but one (width 16 clm, 0.28 bits
behind 1e-2), where 1e-3 left width 16 1.1 bits behind; paper: the paper's 2,048-token context, 256 sequences a step
(32 x 8 accumulated), a GPT-2-style byte-level BPE of GPT-2's size, bf16 and the paper's learning rate."""


def law(unique: float) -> float:
    """The paper's critical compute (6 N D) at `unique` tokens."""
    return LAW[0] * (unique / 1e6) ** LAW[1]


def frontier(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """The lower envelope of (compute, bits) points: at each point's compute, the best bits of any point with at most
    that compute (a step down where a run improves on every cheaper one)."""
    steps: list[tuple[float, float]] = []
    for flops, bits in sorted(points):
        if not steps or bits < steps[-1][1]:
            steps.append((flops, bits))
    return steps


def first_crossing(diffusion: list[tuple[float, float]], autoregressive: list[tuple[float, float]]) -> float | None:
    """The compute from which the diffusion frontier lies below the autoregressive one to the end of the grid: where
    diffusion overtakes for good (None: autoregression leads at the grid's largest compute). A lead diffusion takes
    among the cheapest runs and loses again (runs of a few steps, neither model trained) is not a crossing."""
    if not diffusion or not autoregressive:
        return None
    since = None
    for flops in sorted({f for f, _ in diffusion} | {f for f, _ in autoregressive}):
        a = [b for f, b in autoregressive if f <= flops]
        d = [b for f, b in diffusion if f <= flops]
        ahead = bool(a and d and min(d) < min(a))
        since = (since if since is not None else flops) if ahead else None
    return since


def final_gap(diffusion: list[tuple[float, float]], autoregressive: list[tuple[float, float]]) -> float:
    """Diffusion's best minus autoregression's best over the whole grid (negative: diffusion ahead at the end)."""
    return min(b for _, b in diffusion) - min(b for _, b in autoregressive)


def flops_per_token(shape: Shape, objective: str) -> float:
    """Training FLOPs a token as lmpt counts them (lmpt.train.metrics.training_flops): mdlm's head runs on its masked
    positions only, on average a share (1 + eps) / 2 of them (its expected_loss_fraction)."""
    if objective == AR:
        return shape.flops_per_token
    share = (1.0 + MdlmConfig().eps) / 2.0
    return shape.flops_per_token - 6.0 * shape.width * shape.vocab * (1.0 - share)


@dataclass
class Cell:
    """One (U, objective, width, epochs) of the grid: its plan and each seed's figures."""

    planned: list[PlannedRun]
    bits: dict[int, float] = field(default_factory=dict)
    """Held-out bits per token by seed (NaN: the run completed without a finite figure)."""
    flops: dict[int, float] = field(default_factory=dict)
    """lmpt's logged training FLOPs by seed."""

    @property
    def labels(self) -> dict[str, Any]:
        return self.planned[0].labels

    @property
    def paper_flops(self) -> float:
        return self.planned[0].paper_flops

    def finite(self) -> dict[int, float]:
        return {s: b for s, b in self.bits.items() if math.isfinite(b)}


@dataclass
class AtUnique:
    """What the grid shows at one count of unique tokens."""

    unique: int
    cells: list[Cell]
    missing: list[str]
    """The planned runs at this U not completed."""
    seeds: int

    @property
    def law(self) -> float:
        return law(self.unique)

    @property
    def reach(self) -> float:
        """The largest 6 N D of its completed runs, in multiples of C_crit(U)."""
        done = [c.paper_flops for c in self.cells if c.bits]
        return max(done, default=0.0) / self.law

    def means(self, objective: str, axis: str = "paper") -> list[tuple[float, float]]:
        """(compute, mean bits over seeds) of each cell with a finite figure; compute in 6 N D or lmpt's (logged)."""
        points = []
        for cell in self.cells:
            finite = cell.finite()
            if cell.labels["objective"] != objective or not finite:
                continue
            logged = [cell.flops[s] for s in finite if math.isfinite(cell.flops.get(s, math.nan))]
            if axis == "paper":
                points.append((cell.paper_flops, statistics.fmean(finite.values())))
            elif logged:
                points.append((statistics.fmean(logged), statistics.fmean(finite.values())))
        return points

    def seed_points(self, objective: str, seed: int) -> list[tuple[float, float]]:
        return [
            (c.paper_flops, c.bits[seed])
            for c in self.cells
            if c.labels["objective"] == objective and math.isfinite(c.bits.get(seed, math.nan))
        ]

    def crossing(self, axis: str = "paper") -> float | None:
        """The seed means' crossing, in 6 N D (or lmpt's count)."""
        return first_crossing(frontier(self.means(DIFFUSION, axis)), frontier(self.means(AR, axis)))

    def seed_crossings(self) -> list[float | None]:
        """Each seed's crossing in 6 N D (None: its frontiers do not cross)."""
        return [
            first_crossing(frontier(self.seed_points(DIFFUSION, s)), frontier(self.seed_points(AR, s)))
            for s in range(self.seeds)
        ]

    def gaps(self) -> list[float]:
        """Each seed's mdlm best minus clm best over the grid."""
        gaps = []
        for s in range(self.seeds):
            fronts = [frontier(self.seed_points(o, s)) for o in (DIFFUSION, AR)]
            if all(fronts):
                gaps.append(final_gap(*fronts))
        return gaps


class Crossover(Reproduction):
    name: ClassVar[str] = "crossover"
    title: ClassVar[str] = "when diffusion overtakes autoregression: critical compute on a frontier (Prabhudesai 2025)"
    paper: ClassVar[str] = (
        'Prabhudesai, Wu, Zadeh, Fragkiadaki and Pathak (2025), "Diffusion Beats Autoregressive in Data-Constrained '
        'Settings", arXiv:2507.15857'
    )
    claim: ClassVar[str] = (
        'The project page\'s "Linear Fit of Critical Compute": on frontiers over compute-optimal model sizes, masked '
        "diffusion's validation loss falls below autoregression's once compute (6 N D) passes C_crit(U) = 2.12e15 "
        "(U / 1e6)^2.174 FLOPs, U the unique tokens."
    )
    papers_figures: ClassVar[str] = (
        "C_crit(U) = 2.12e15 x (U / 1e6)^2.174 FLOPs (6 N D, N with the embedding), fitted through crossings at 25M to "
        "100M unique tokens with models of 7M to 2.5B parameters and up to 800 epochs, each objective trained with "
        f"{PAPER_RECIPE}, on C4 with GPT-2's 50,257-piece tokenizer and a 2,048-token context. Their frontiers are the "
        "best validation loss at each compute over every model size and epoch count."
    )
    cost_note: ClassVar[str] = (
        "scale=laptop is what 2 CPU cores finish in about 90 minutes (`dry_run=true` states the plan's time before "
        "anything starts; `max_minutes` refuses a longer one). `lmpt-reproduce crossover scale=paper` plans the "
        "paper's smallest count of unique tokens with a ladder of sizes over the paper's range at its vocabulary, "
        "context and batch, to run on GPUs (`device=gpu`) or SLURM (`launcher=slurm`); its text must hold that many "
        "tokens: give the paper's, C4, as `corpus=PATH`. `corpus`, `ladder`, `unique_tokens` and `epochs` change "
        "either grid."
    )
    grid_keys: ClassVar[tuple[str, ...]] = ("corpus", "ladder", "unique_tokens", "epochs")
    scales: ClassVar[dict[Scale, dict[str, Any]]] = {
        Scale.laptop: {
            "corpus": ["wikitext"],
            "ladder": [str(w) for w in LADDER],
            "unique_tokens": ["10000", "20000", "40000"],
            "epochs": ["1", "4", "16", "32", "64", "128", "256"],
            "seeds": 3,
        },
        Scale.paper: {
            "corpus": ["wikitext"],
            "ladder": ["128", "256", "384", "512", "640", "768", "1024", "1280", "1536", "1792"],
            "unique_tokens": ["25000000"],
            "epochs": ["4", "8", "16", "32", "64", "128", "256"],
            "seeds": 3,
        },
    }

    def __init__(self, scale: Scale = Scale.laptop, seeds: int | None = None, **given: list[str]) -> None:
        super().__init__(scale, seeds, **given)
        self.setting = SETTINGS[scale]
        corpora = self.grid["corpus"]
        if len(corpora) != 1:
            raise LmptError(f"corpus=[{','.join(corpora)}] names {len(corpora)} texts: {self.name} takes one")
        self.corpus = corpora[0]
        self.data_keys = corpus_keys(self.corpus)
        least = self.setting.seq_len + 1
        self.unique = sorted(set(numbers(self, "unique_tokens", int, least)))
        self.epochs = sorted(set(numbers(self, "epochs", float, 1)))
        widths = sorted(set(numbers(self, "ladder", int, 1)))
        if self.unique[-1] > MAX_UNIQUE:
            raise LmptError(
                f"unique_tokens={self.unique[-1]:.3g} is more text than any corpus: give at most {MAX_UNIQUE:.0e}"
            )
        if widths[-1] > MAX_WIDTH:
            raise LmptError(
                f"ladder width {widths[-1]:.3g} is past any model lmpt trains: give widths up to {MAX_WIDTH:,}"
            )
        self.ladder = check_ladder(widths, self.setting.vocab, self.setting.seq_len)
        self._check_grid()

    def _check_grid(self) -> None:
        """Refuse, in one line, a grid that cannot place the crossing where the law puts it at some U: no run under
        the cap, a largest run short of C_crit(U), or a cheapest run already past it."""
        planned = self.runs()
        for unique in self.unique:
            flops = [r.paper_flops for r in planned if r.labels["unique"] == unique]
            where = f"at unique_tokens={unique} (the law's C_crit: {law(unique):.2e} FLOPs, 6ND)"
            if not flops:
                raise LmptError(
                    f"the grid has no run {where}: every model and epoch count is above {CAP_FACTOR:g}x C_crit; give "
                    "more unique tokens, fewer epochs or narrower models"
                )
            if max(flops) < law(unique):
                raise LmptError(
                    f"the grid cannot reach the law's crossing {where}: its largest run is "
                    f"{max(flops) / law(unique):.2g}x C_crit; give more epochs or wider models"
                )
            if min(flops) > law(unique):
                raise LmptError(
                    f"the grid starts past the law's crossing {where}: its cheapest run is "
                    f"{min(flops) / law(unique):.2g}x C_crit; give fewer epochs or narrower models"
                )

    # -- the plan ---------------------------------------------------------------------------------------------------
    def budget_shapes(self, unique: int, epochs: float) -> list[Shape]:
        """The rungs a budget of unique x epochs tokens trains: the one nearest its compute-optimal size (in log) and
        NEIGHBOURS either side."""
        best = optimal_parameters(unique * epochs)
        nearest = min(range(len(self.ladder)), key=lambda i: abs(math.log(self.ladder[i].parameters) - math.log(best)))
        return self.ladder[max(0, nearest - NEIGHBOURS) : nearest + NEIGHBOURS + 1]

    def runs(self) -> list[PlannedRun]:
        planned = []
        for seed in range(self.seeds):
            for unique in self.unique:
                for epochs in self.epochs:
                    steps = unique * epochs / self.setting.tokens_per_step
                    if not math.isfinite(steps):  # past any cap: never rounded
                        continue
                    for shape in self.budget_shapes(unique, epochs):
                        run = self._planned(AR, shape, unique, epochs, seed, max(1, round(steps)))
                        if run.paper_flops <= CAP_FACTOR * law(unique):
                            planned += [run, self._planned(DIFFUSION, shape, unique, epochs, seed, run.labels["steps"])]
        return planned

    def _planned(self, objective: str, shape: Shape, unique: int, epochs: float, seed: int, steps: int) -> PlannedRun:
        setting = self.setting
        tokens = steps * setting.tokens_per_step
        return PlannedRun(
            f"u{unique}-w{shape.width}-{epochs:g}x-{objective}-seed{seed}",
            (
                f"objective={objective}",
                *self.data_keys,
                *setting.keys(),
                *shape.keys(),
                *(f"{key}={value}" for key, value in RECIPE.items()),
                f"scheduler.warmup_steps={max(1, round(WARMUP_SHARE * steps))}",
                f"data.unique_tokens={unique}",
                f"trainer.max_steps={steps}",
                f"trainer.seed={seed}",
                *COMMON,
            ),
            {
                "objective": objective,
                "model": shape.label,
                "width": shape.width,
                "parameters": shape.parameters,
                "unique": unique,
                "epochs": epochs,
                "steps": steps,
                "tokens": tokens,
                "seed": seed,
            },
            flops_per_token(shape, objective) * tokens,
            6.0 * shape.parameters * tokens,
        )

    # -- the analysis -----------------------------------------------------------------------------------------------
    def analyse(self, finished: list[FinishedRun]) -> Findings:
        planned = self.runs()
        found = [self._at(unique, planned, finished) for unique in self.unique]
        general = self._conditions(planned, found)
        claims = [self._near_claim(at, general) for at in found]
        if len(found) > 1:
            claims.append(self._exponent_claim(found, general))
        conditions = [*general.values(), self._reach_condition(found)]
        sections = [
            ("The critical compute, per count of unique tokens", self._crossings_section(found)),
            ("The grid: compute-optimal sizes per budget", self._grid_section(planned)),
            ("Two counts of compute", _flops_section(planned)),
            ("Every run", _runs_section(found)),
        ]
        return Findings(claims, conditions, _headline(found), sections, self._plot(found))

    def _at(self, unique: int, planned: list[PlannedRun], finished: list[FinishedRun]) -> AtUnique:
        cells: dict[tuple, Cell] = {}
        for run in planned:
            labels = run.labels
            if labels["unique"] == unique:
                key = (labels["objective"], labels["width"], labels["epochs"])
                cells.setdefault(key, Cell([])).planned.append(run)
        done = set()
        for completed in finished:
            labels = completed.planned.labels
            cell = cells.get((labels["objective"], labels["width"], labels["epochs"]))
            if labels["unique"] == unique and cell is not None:
                cell.bits[labels["seed"]] = completed.last(BITS_PER_TOKEN)
                cell.flops[labels["seed"]] = completed.last("flops")
                done.add(completed.planned.name)
        missing = [r.name for c in cells.values() for r in c.planned if r.name not in done]
        return AtUnique(unique, list(cells.values()), missing, self.seeds)

    def _conditions(self, planned: list[PlannedRun], found: list[AtUnique]) -> dict[str, Condition]:
        """The conditions the claims depend on (met or missed) and those stated for the reader, from the plan."""
        sizes = sorted({r.labels["parameters"] for r in planned})
        shapes = sorted({r.labels["width"] for r in planned})
        embedding = [Shape(w, self.setting.vocab, self.setting.seq_len) for w in shapes]
        shares = [s.vocab * s.width / s.parameters for s in embedding]
        budgets = sorted({(r.labels["unique"], r.labels["epochs"]) for r in planned})
        sized = [(u, e) for u, e in budgets if self._has_optimal(planned, u, e)]
        ratios = [r.labels["tokens"] / r.labels["parameters"] for r in planned]
        recipe = _recipe(planned)
        seen_epochs = [c.labels["epochs"] for at in found for c in at.cells if c.bits]
        setting = self.setting
        low_u, high_u = PAPER_UNIQUE
        return {
            "parameters": Condition(
                "model sizes (parameters with the embedding)",
                f"{_count(PAPER_PARAMETERS[0])} to {_count(PAPER_PARAMETERS[1])}",
                f"{_count(sizes[0])} to {_count(sizes[-1])}",
                sizes[0] >= PAPER_PARAMETERS[0],
                "" if sizes[0] >= PAPER_PARAMETERS[0] else "smaller models cross later (Ni et al. 2025)",
            ),
            "non-embedding": Condition(
                "non-embedding parameters",
                "not stated apart (their N counts the embedding)",
                f"{_count(embedding[0].matmul_parameters)} to {_count(embedding[-1].matmul_parameters)} "
                f"({min(shares):.0%} to {max(shares):.0%} of each model in its embedding)",
            ),
            "sizing": Condition(
                "compute-optimal sizing",
                "each budget's compute-optimal size on the frontier (about 20 tokens a parameter)",
                f"{len(sized)} of {len(budgets)} budgets within {SIZING_FACTOR:g}x of D / 20 parameters; "
                f"{min(ratios):.2g} to {max(ratios):.3g} tokens a parameter",
                len(sized) == len(budgets),
                self._sizing_gaps([b for b in budgets if b not in sized]),
            ),
            "unique": Condition(
                "unique tokens U",
                f"{_count(low_u)} to {_count(high_u)}",
                ", ".join(_count(u) for u in self.unique),
                min(self.unique) >= low_u,
                "" if min(self.unique) >= low_u else f"the law extrapolated {low_u / max(self.unique):.3g}x below",
            ),
            "recipe": Condition(
                "training recipe",
                PAPER_RECIPE,
                recipe.text,
                recipe.met,
                recipe.why,
            ),
            "epochs": Condition(
                "epochs",
                f"up to {PAPER_EPOCHS}",
                f"{_epochs_text(self.epochs)} planned; "
                + (f"up to {max(seen_epochs):g} completed" if seen_epochs else "none completed"),
            ),
            "vocabulary": Condition(
                "vocabulary",
                "GPT-2's BPE, 50,257 pieces",
                f"{setting.tokenizer} trained on the corpus, {setting.vocab:,} pieces",
            ),
            "context": Condition(
                "context and batch",
                "2,048 tokens, 256 sequences a step",
                f"{setting.seq_len:,} tokens, {setting.batch * setting.accum} sequences a step",
            ),
            "loss": Condition(
                "what the loss is measured on",
                "C4's validation documents: AR's loss, diffusion's bound (ELBO)",
                f"the same held-out windows of {self.corpus} ({DataConfig().val_fraction:.0%} of its documents) for "
                "both: clm's exact bits per token, mdlm's bound",
            ),
        }

    def _has_optimal(self, planned: list[PlannedRun], unique: int, epochs: float) -> bool:
        best = optimal_parameters(unique * epochs)
        return any(
            abs(math.log(r.labels["parameters"] / best)) <= math.log(SIZING_FACTOR)
            for r in planned
            if r.labels["unique"] == unique and r.labels["epochs"] == epochs
        )

    def _sizing_gaps(self, lacking: list[tuple[int, float]]) -> str:
        """Why budgets lack their compute-optimal size: the ladder ends below or above it, its model is above the
        cap, or the ladder steps over it."""
        reasons = {"small": 0, "large": 0, "cap": 0, "gap": 0}
        for unique, epochs in lacking:
            best = optimal_parameters(unique * epochs)
            near = [s for s in self.ladder if abs(math.log(s.parameters / best)) <= math.log(SIZING_FACTOR)]
            if best < self.ladder[0].parameters / SIZING_FACTOR:
                reasons["small"] += 1
            elif best > self.ladder[-1].parameters * SIZING_FACTOR:
                reasons["large"] += 1
            else:
                reasons["cap" if near else "gap"] += 1
        words = {
            "small": "need a model smaller than the ladder's smallest",
            "large": "need one larger than its largest",
            "cap": f"have theirs above {CAP_FACTOR:g}x C_crit",
            "gap": "fall between its rungs",
        }
        return ", ".join(f"{n} budget(s) {words[k]}" for k, n in reasons.items() if n)

    def _reach_condition(self, found: list[AtUnique], only: AtUnique | None = None) -> Condition:
        """How far past C_crit(U) the completed runs reach (6 N D): all U, or `only` one."""
        chosen = [only] if only is not None else found
        reached = [at for at in chosen if any(c.bits for c in at.cells)]
        text = "; ".join(f"{at.reach:.2g}x at U = {_count(at.unique)}" for at in reached) or "no completed run"
        met = bool(reached) and len(reached) == len(chosen) and min(at.reach for at in reached) >= REACH
        return Condition(
            "compute reached (6ND, in multiples of C_crit(U), from the completed runs)",
            "past C_crit(U), where the crossing is seen",
            text,
            met,
            "" if met else f"the claim needs {REACH:g}x",
        )

    def _depends(self, general: dict[str, Condition], reach: Condition) -> list[Condition]:
        return [general[k] for k in ("parameters", "sizing", "unique", "recipe")] + [reach]

    def _near_claim(self, at: AtUnique, general: dict[str, Condition]) -> ClaimVerdict:
        claim = f"at U = {_count(at.unique)}, mdlm's frontier crosses below clm's near C_crit(U) = {at.law:.2e}"
        conditions = self._depends(general, self._reach_condition([at], at))
        if at.missing:
            return judge(claim, Evidence.missing, "", conditions, _missing_text(at))
        crossings = at.seed_crossings()
        crossed = [c for c in crossings if c is not None]
        if not crossed:
            figure = f"no crossing up to {at.reach:.2g}x C_crit (6ND)"
            if at.reach >= REACH:
                why = f"no seed's mdlm frontier is below clm's at the grid's end ({len(crossings)} seeds)"
                return judge(claim, Evidence.contradicts, figure, conditions, why)
            why = f"the grid reaches only {at.reach:.2g}x C_crit, short of {REACH:g}x"
            return judge(claim, Evidence.undecided, figure, conditions, why)
        mean = at.crossing()
        lmpt_count = at.crossing("lmpt") or math.nan
        figure = (
            f"crossing at {mean:.2e} FLOPs (6ND), {mean / at.law:.2g}x the law; {lmpt_count:.2e} in lmpt's count"
            if mean
            else f"each seed's crossing: {_crossings_text(crossings)}"
        )
        if len(crossed) < len(crossings):
            why = f"{len(crossed)} of {len(crossings)} seeds' frontiers cross ({_crossings_text(crossings)})"
            return judge(claim, Evidence.undecided, figure, conditions, why)
        span = _log_interval(crossed)
        if span is None:
            return judge(claim, Evidence.undecided, figure, conditions, "one seed: no interval")
        note = _too_wide(crossed, span, geometric=True)
        if note:
            return judge(claim, Evidence.undecided, figure, conditions, note)
        low, high = span
        evidence = within_margin(math.log(low / at.law), math.log(high / at.law), math.log(NEAR))
        why = f"95% t interval over seeds {low:.2e} to {high:.2e}, {low / at.law:.2g}x to {high / at.law:.2g}x the law"
        return judge(claim, evidence, figure, conditions, why)

    def _exponent_claim(self, found: list[AtUnique], general: dict[str, Condition]) -> ClaimVerdict:
        claim = f"the critical compute grows as U^{LAW[1]} across U"
        conditions = self._depends(general, self._reach_condition(found))
        short = [at for at in found if at.missing]
        if short:
            why = "; ".join(_missing_text(at) for at in short)
            return judge(claim, Evidence.missing, "", conditions, why)
        mean = _power_law({at.unique: c for at in found if (c := at.crossing())})
        figure = f"exponent {mean[1]:.2f} through the seed means' crossings" if mean else "fewer than two U cross"
        exponents = []
        for seed in range(self.seeds):
            crossings = {at.unique: c for at in found if (c := at.seed_crossings()[seed])}
            fit = _power_law(crossings)
            if fit:
                exponents.append(fit[1])
        if len(exponents) < self.seeds or len(exponents) < 2:
            why = f"{len(exponents)} of {self.seeds} seeds cross at two or more U: no interval of the exponent"
            return judge(claim, Evidence.undecided, figure, conditions, why)
        span = seed_interval(exponents)
        assert span is not None
        note = _too_wide(exponents, span)
        if note:
            return judge(claim, Evidence.undecided, figure, conditions, note)
        evidence = within_margin(span[0] - LAW[1], span[1] - LAW[1], EXPONENT_MARGIN)
        why = f"95% t interval over seeds {span[0]:.2f} to {span[1]:.2f}; within {EXPONENT_MARGIN:g} of {LAW[1]} agrees"
        return judge(claim, evidence, figure, conditions, why)

    # -- the document -----------------------------------------------------------------------------------------------
    def _crossings_section(self, found: list[AtUnique]) -> str:
        rows = []
        for at in found:
            crossings = at.seed_crossings()
            crossed = [c for c in crossings if c is not None]
            span = _log_interval(crossed) if len(crossed) == len(crossings) else None
            mean, lmpt_count = at.crossing(), at.crossing("lmpt")
            interval = "—" if span is None else f"[{span[0]:.2e}, {span[1]:.2e}]"
            if span is not None and _too_wide(crossed, span, geometric=True):
                interval += " (2 seeds, 1 degree of freedom: wider than the value, no verdict's basis)"
            rows.append(
                [
                    f"{at.unique:,}",
                    f"{at.law:.2e}",
                    f"{mean:.2e}" if mean else f"none up to {at.reach * at.law:.2e}",
                    _crossings_text(crossings),
                    interval,
                    f"{mean / at.law:.2g}" if mean else "—",
                    f"{lmpt_count:.2e}" if lmpt_count else "—",
                    f"{at.reach:.2g}x",
                    _best_text(frontier(at.means(AR))),
                    _best_text(frontier(at.means(DIFFUSION))),
                    _seed_cell(at.gaps(), "+.3f"),
                ]
            )
        table = markdown_table(
            [
                "unique tokens",
                "law's C_crit (6ND)",
                "lmpt's crossing (seed means, 6ND)",
                "each seed's crossing",
                "95% t interval (log, over seeds)",
                "crossing / law",
                "crossing in lmpt's count",
                "grid reaches",
                "clm's best (6ND)",
                f"mdlm's best{bound_note(DIFFUSION)} (6ND)",
                "mdlm - clm at the end [95% t, seeds]",
            ],
            rows,
        )
        fit = _power_law({at.unique: c for at in found if (c := at.crossing())})
        fit_text = (
            f"Through lmpt's crossings (6ND): C_crit(U) = {fit[0]:.3g} x (U / 1e6)^{fit[1]:.3f} FLOPs, beside the "
            f"paper's {LAW[0]:.3g} x (U / 1e6)^{LAW[1]}."
            if fit
            else "Fewer than two counts of unique tokens cross inside the grid: no power law through them."
        )
        note = (
            "A crossing is the compute from which mdlm's frontier stays below clm's to the grid's end, at a run of the "
            "grid: the true crossing lies between it and the cheaper run before it. Compute is the paper's 6 N D; "
            "the crossing on lmpt's own count is found on the same runs' logged FLOPs."
        )
        return "\n".join([*table, "", fit_text, "", note])

    def _grid_section(self, planned: list[PlannedRun]) -> str:
        rows = []
        for unique in self.unique:
            for epochs in self.epochs:
                runs = [
                    r
                    for r in planned
                    if r.labels["unique"] == unique and r.labels["epochs"] == epochs and r.labels["seed"] == 0
                ]
                tokens = unique * epochs
                models = sorted({(r.labels["width"], r.labels["parameters"], r.paper_flops) for r in runs})
                trained = ", ".join(f"width {w} ({_count(n)}, {tokens / n:.2g} tokens/parameter)" for w, n, _ in models)
                reach = ", ".join(f"{f / law(unique):.2g}" for *_, f in models)
                rows.append(
                    [
                        f"{unique:,}",
                        f"{epochs:g}",
                        _count(tokens),
                        _count(optimal_parameters(tokens)),
                        trained or f"none under {CAP_FACTOR:g}x C_crit",
                        reach or "—",
                    ]
                )
        table = markdown_table(
            ["unique tokens", "epochs", "D", "compute-optimal N (D / 20)", "models trained", "6ND / C_crit(U)"], rows
        )
        setting = self.setting
        note = (
            f"Every budget trains the ladder's model nearest D / 20 parameters and {NEIGHBOURS} either side, each "
            f"objective at seeds 0 to {self.seeds - 1}; runs above {CAP_FACTOR:g}x C_crit(U) are not planned. The "
            f"shape follows the width (a layer and a head per 32 dimensions, a feed-forward of 3 widths); "
            f"{setting.tokens_per_step:,} tokens a step ({setting.batch * setting.accum} x {setting.seq_len}), so D is "
            "rounded to whole steps. Text: the first U tokens of the corpus's training text, the same for every run."
        )
        return "\n".join([note, "", *table])

    def _plot(self, found: list[AtUnique]) -> Figure:
        figure = Figure(figsize=(4 * (len(found) + 1), 4.2), layout="constrained")
        axes = figure.subplots(1, len(found) + 1)
        colours = dict(zip(OBJECTIVES, ("tab:blue", "tab:orange"), strict=True))
        for ax, at in zip(axes, found, strict=False):
            for objective in OBJECTIVES:
                cells = at.means(objective)
                if not cells:
                    continue
                ax.scatter(*zip(*cells, strict=True), s=10, alpha=0.35, color=colours[objective])
                xs, ys = zip(*frontier(cells), strict=True)
                ax.step(
                    [*xs, max(f for f, _ in cells)],
                    [*ys, ys[-1]],
                    where="post",
                    color=colours[objective],
                    label=f"{objective} frontier" + bound_note(objective),
                )
            ax.axvline(at.law, linestyle=":", color="grey", label="law's C_crit")
            crossing = at.crossing()
            if crossing:
                best = min(b for f, b in at.means(DIFFUSION) if f <= crossing)
                ax.scatter(
                    [crossing], [best], s=180, facecolors="none", edgecolors="red", linewidths=2, label="crossing"
                )
            ax.set_xscale("log")
            ax.set_xlabel("training FLOPs (6ND)")
            ax.set_ylabel("held-out bits per token")
            ax.set_title(f"{at.unique:,} unique tokens")
            ax.legend(fontsize=7)
        ax = axes[-1]
        grid = np.geomspace(min(self.unique) / 2, max(self.unique) * 2, 50)
        ax.plot(grid, [law(u) for u in grid], ":", color="grey", label="paper's law")
        crossings = {at.unique: c for at in found if (c := at.crossing())}
        if crossings:
            ax.scatter(list(crossings), list(crossings.values()), color="red", label="lmpt's crossings")
        else:
            ax.text(0.5, 0.1, "no crossing inside the grid", transform=ax.transAxes, ha="center", color="red")
        fit = _power_law(crossings)
        if fit:
            ax.plot(grid, fit[0] * (grid / 1e6) ** fit[1], "-", color="red", alpha=0.5, label="fit through them")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("unique tokens")
        ax.set_ylabel("critical compute (6ND FLOPs)")
        ax.legend(fontsize=7)
        return figure


@dataclass(frozen=True)
class RecipeCheck:
    text: str
    met: bool
    why: str


def _recipe(planned: list[PlannedRun]) -> RecipeCheck:
    """The recipe every planned run is launched with, read from its keys, against the paper's."""
    keyed = [dict(k.split("=", 1) for k in run.keys) for run in planned]
    first = keyed[0]
    met = all(all(keys.get(k) == v for k, v in RECIPE.items()) for keys in keyed)
    warmups = [int(keys["scheduler.warmup_steps"]) / int(keys["trainer.max_steps"]) for keys in keyed]
    text = (
        f"{first.get('optimizer', 'muon')}, lr {first.get('optimizer.lr', 'default')}, weight decay "
        f"{first.get('optimizer.weight_decay', 'default')}, dropout {first.get('model.dropout', '0.0')}, "
        f"{first.get('scheduler', 'cosine')} to {first.get('scheduler.min_lr_ratio', 'default')} of the peak, "
        f"warm-up {_span(warmups, '.0%')} of the steps, the same for both objectives"
    )
    why = "lmpt never decays embeddings, norms or biases" + ("" if met else "; a run misses the paper's recipe")
    return RecipeCheck(text, met, why)


def _headline(found: list[AtUnique]) -> str:
    if any(at.missing for at in found):
        return f"{sum(len(at.missing) for at in found)} runs missing"
    crossed = {at.unique: c for at in found if (c := at.crossing())}
    if not crossed:
        return "no crossing up to " + ", ".join(f"{at.reach:.2g}x" for at in found) + " C_crit (6ND)"
    return "crossing at " + ", ".join(f"{c / law(u):.2g}x C_crit at U = {_count(u)}" for u, c in crossed.items())


def _flops_section(planned: list[PlannedRun]) -> str:
    """Both counts of compute, with the ratio between them on this grid (from the plan)."""
    lines = []
    for objective in OBJECTIVES:
        ratios = [r.flops / r.paper_flops for r in planned if r.labels["objective"] == objective]
        lines.append(f"{objective} {min(ratios):.2f} to {max(ratios):.2f}")
    return (
        "The paper counts compute as 6 N D, N the parameters with the embedding (its repository's parameter formula); "
        "the law is in that count, and every crossing is compared with it in that count. lmpt counts what a run "
        "computes: 6 N_mm + 12 L d S + 6 d V a token, the output head on the positions that run it (all of clm's, "
        "mdlm's masked ones), which the runs log as `flops`. On this grid lmpt's count is, per run, "
        + "; ".join(lines)
        + " times the paper's."
    )


def _runs_section(found: list[AtUnique]) -> str:
    rows = []
    for at in found:
        for cell in sorted(at.cells, key=lambda c: (c.labels["objective"], c.labels["width"], c.labels["epochs"])):
            labels = cell.labels
            seeds = sorted(r.labels["seed"] for r in cell.planned)
            bits = " / ".join(f"{cell.bits[s]:.3f}" if s in cell.bits else "—" for s in seeds)
            logged = [cell.flops[s] for s in cell.bits if math.isfinite(cell.flops.get(s, math.nan))]
            rows.append(
                [
                    f"{at.unique:,}",
                    labels["objective"],
                    str(labels["width"]),
                    f"{labels['parameters']:,}",
                    f"{labels['epochs']:g}",
                    f"{labels['tokens']:,}",
                    f"{labels['tokens'] / labels['parameters']:.3g}",
                    f"{cell.paper_flops:.3e}",
                    f"{statistics.fmean(logged):.3e}" if logged else "—",
                    bits,
                ]
            )
    count = max((at.seeds for at in found), default=1)
    table = markdown_table(
        [
            "unique tokens",
            "objective",
            "width",
            "parameters",
            "epochs",
            "tokens D",
            "D / N",
            "6ND",
            "lmpt's FLOPs (logged, seed mean)",
            f"held-out bits per token, seed {' / '.join(str(s) for s in range(count))}",
        ],
        rows,
    )
    note = "Each run's last held-out figure (exact for clm, the bound for mdlm); — where a run is not completed."
    return "\n".join([note, "", *table])


def _missing_text(at: AtUnique) -> str:
    total = sum(len(c.planned) for c in at.cells)
    none = [o for o in OBJECTIVES if not any(c.bits for c in at.cells if c.labels["objective"] == o)]
    names = ", ".join(at.missing[:3]) + (", ..." if len(at.missing) > 3 else "")
    head = f"no completed {' or '.join(none)} run at U = {_count(at.unique)}; " if none else ""
    return f"{head}{len(at.missing)} of {total} planned runs at U = {_count(at.unique)} not completed ({names})"


def _crossings_text(crossings: list[float | None]) -> str:
    return ", ".join("none" if c is None else f"{c:.2e}" for c in crossings) or "—"


def _best_text(front: list[tuple[float, float]]) -> str:
    if not front:
        return "—"
    flops, bits = front[-1]
    return f"{bits:.3f} ({flops:.2e})"


def _log_interval(values: list[float]) -> tuple[float, float] | None:
    """95% t interval over seeds of the geometric mean of `values` (in their units); None with fewer than two."""
    span = seed_interval([math.log(v) for v in values])
    return None if span is None else (math.exp(span[0]), math.exp(span[1]))


def _too_wide(values: list[float], span: tuple[float, float], geometric: bool = False) -> str:
    """A note where two seeds' t interval (1 degree of freedom: 12.7 standard errors either side) is wider than the
    value it brackets, which is then no verdict's basis; empty otherwise."""
    centre = math.exp(statistics.fmean(math.log(v) for v in values)) if geometric else statistics.fmean(values)
    if len(values) != 2 or span[1] - span[0] <= abs(centre):
        return ""
    return (
        f"2 seeds: the t interval [{span[0]:.3g}, {span[1]:.3g}] (1 degree of freedom) is wider than the value "
        f"{centre:.3g}, no basis for a verdict; run seeds=3"
    )


def _seed_cell(values: list[float], spec: str) -> str:
    """mean_cell, with the note where two seeds' interval is wider than the mean."""
    span = seed_interval(values)
    if span is not None and _too_wide(values, span):
        mean = statistics.fmean(values)
        return f"{mean:{spec}} (2 seeds: [{span[0]:{spec}}, {span[1]:{spec}}], wider than the value)"
    return mean_cell(values, spec)


def _power_law(crossings: dict[int, float]) -> tuple[float, float] | None:
    """(a, k) of C = a (U / 1e6)^k through the crossings (least squares in logs); None with fewer than two."""
    if len(crossings) < 2:
        return None
    x = np.log(np.array(list(crossings)) / 1e6)
    y = np.log(np.array(list(crossings.values())))
    k, log_a = np.polyfit(x, y, 1)
    return float(math.exp(log_a)), float(k)


def _count(n: float) -> str:
    """A count in a few digits: 36k, 1.1M, 2.5B."""
    if not math.isfinite(n):
        return f"{n:g}"
    for scale, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if n >= scale:
            return f"{n / scale:.3g}{suffix}"
    return f"{n:.3g}"


def _span(values: list[float], spec: str) -> str:
    """'LOW to HIGH', or the one value where all are equal in `spec`."""
    low, high = f"{min(values):{spec}}", f"{max(values):{spec}}"
    return low if low == high else f"{low} to {high}"


def _epochs_text(epochs: list[float]) -> str:
    return ", ".join(f"{e:g}" for e in epochs)
