"""Repetition as Muennighoff et al. 2023 fit it: the data-constrained law with both of its decays, repeated data (R_D*)
and parameters in excess of the compute-optimal size for the unique data (R_N*), fitted jointly as their notebook
does (lmpt.reproduce.data_constrained_law), beside the one-term fit that decays data alone; for clm and for masked
diffusion (mdlm), whose R_D* Prabhudesai et al. 2025 find far larger.

A run's loss is its held-out loss in nats a token on the same windows for every run (val_bits_per_token x ln 2): exact
for clm, the diffusion bound for mdlm (an upper bound on its negative log-likelihood). Stage 1 (Chinchilla's E +
A/N^alpha + B/D^beta, the part Chinchilla's C4 points play in the notebook) is fitted through the single-epoch runs,
which the grid keeps at most the compute-optimal size so that none loses to excess parameters; stage 2 fits R_D* and
R_N* over every run. Which runs enter the fit is `include_points`'s rule: a run whose loss is not finite or is at or
above ln V (a uniform guess over the vocabulary) diverged and is left out, and listed with its reason; the notebook's
other removals (runs whose loss rose with more epochs among them) are a hand-made list, not a rule, so lmpt keeps those
runs and says so. The 95% intervals of R_D* and R_N* are a percentile bootstrap over seeds, each cell's seeds drawn
again and both stages refitted (`bootstrap_stars`); the claims are judged by lmpt.reproduce.verdict beside the
conditions computed from the grid."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import ClassVar

import numpy as np
from matplotlib.figure import Figure

from lmpt.downstream.significance import seed_interval
from lmpt.errors import LmptError
from lmpt.objectives.yardstick import BITS_PER_TOKEN
from lmpt.report.markdown import markdown_table
from lmpt.reproduce.data_constrained_law import (
    HUBER_DELTA,
    PAPER_DATA_ONLY_R_D_STAR,
    PAPER_LAW,
    R_STAR_BOUNDS,
    DataConstrainedLaw,
    Decay,
    LossPoint,
    StarIntervals,
    bootstrap_stars,
    fit_base_law,
    fit_law,
    include_points,
)
from lmpt.reproduce.ladder import TOKENS_PER_PARAMETER, Shape, check_ladder, optimal_parameters
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
    numbers,
)
from lmpt.reproduce.verdict import ClaimVerdict, Condition, Evidence, below, inside, judge, within_margin

OBJECTIVES = (AR, DIFFUSION)
DIFFUSION_R_D_STAR = 500.0
"""R_D* of masked diffusion as Prabhudesai et al. 2025 fit it ("about 500"), shown beside mdlm's; not judged."""
PAPER_PARAMETERS = (7_098_752, 8.67e9)
PAPER_UNIQUE = (1e8, 1.78e11)
PAPER_EPOCHS = (1, 9_000)
PAPER_TOKENS_PER_PARAMETER = (0.091, 63_830)
PAPER_EXCESS = (0.065, 215)
"""The ranges of the notebook's fitted runs (its data cell "outliers removed", 182 runs): parameters with the
embedding, unique tokens, epochs, tokens per parameter, and N / N_opt(U) with N_opt(U) = U / 19.6 (their C4 law)."""
PAPER_VOCAB = 50_257
PAPER_CONTEXT = 2_048
"""GPT-2's tokenizer and the paper's context."""
PRABHUDESAI_PARAMETERS = 7e6
"""Prabhudesai et al.'s smallest model (7M to 2.5B parameters)."""
FREE_EPOCHS = 4
FREE_MARGIN = 0.01
""""Nearly free": 4 epochs of D/4 within 1% of the held-out loss of 1 epoch of D, the paired interval inside."""
OPTIMAL_FACTOR = 2.0
"""A rung within this factor of a budget's compute-optimal size (D / 20) is compute-optimal for it: a budget's
single-epoch runs are the rungs of at most that size, and the one nearest it should be within this factor."""
BOOTSTRAP = 199
"""Resamples of the seed bootstrap (each refits both stages)."""
FIT_STARTS: int | None = None
"""Stage 1's starts for the point fits (None: every start of the notebook's grid)."""
RECOVERY_TOLERANCE = 0.25
"""The grid identifies the law when, from runs the law makes at its points, the fit gives back R_D* and R_N* within
this share."""
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


@dataclass
class Fitted:
    """One objective's fit: the runs in it and those left out (with the reason), the planned runs not completed,
    the law with both decays and with data's alone, and their bootstrap intervals."""

    objective: str
    kept: list[LossPoint]
    left_out: list[tuple[LossPoint, str]]
    missing: list[str]
    both: DataConstrainedLaw | None = None
    data: DataConstrainedLaw | None = None
    both_ci: StarIntervals | None = None
    data_ci: StarIntervals | None = None
    notes: list[str] = field(default_factory=list)
    """Why a fit or an interval is absent."""


class Repetition(Reproduction):
    """The grid, from its keys (each a list; `scale` gives their defaults):

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

    name: ClassVar[str] = "repetition"
    title: ClassVar[str] = (
        "repeated data and excess parameters: the data-constrained law's R_D* and R_N* (Muennighoff 2023)"
    )
    paper: ClassVar[str] = (
        'Muennighoff, Rush, Barak, Le Scao, Piktus, Tazi, Pyysalo, Wolf and Raffel (2023), "Scaling Data-Constrained '
        'Language Models", arXiv:2305.16264 (its fit: huggingface/datablations, utils/parametric_fit.ipynb); with '
        'Prabhudesai, Wu, Zadeh, Fragkiadaki and Pathak (2025), "Diffusion Beats Autoregressive in Data-Constrained '
        'Settings", arXiv:2507.15857'
    )
    claim: ClassVar[str] = (
        "Muennighoff et al., Section 5 and Figures 3 to 5: loss follows L = E + A / N'^alpha + B / D'^beta, where "
        "repeated data decays with R_D* = 15.4 and parameters in excess of the compute-optimal size for the unique "
        "data with R_N* = 5.3, fitted jointly; 4 epochs of repeated data are nearly as good as unique data. "
        "Prabhudesai et al.: masked diffusion's R_D* is far larger than autoregression's."
    )
    papers_figures: ClassVar[str] = (
        f'- R_D* = {PAPER_LAW.r_d_star:.2f} and R_N* = {PAPER_LAW.r_n_star:.2f} (the notebook\'s "Default": '
        "stage 1 E, A, B, alpha = beta from Chinchilla's C4 iso-FLOP points, then both decays jointly on 182 runs "
        "by a Huber loss on log loss, L-BFGS from a grid of starts).\n"
        f'- With parameters left undecayed ("Default but decay data only not params"): R_D* = '
        f"{PAPER_DATA_ONLY_R_D_STAR:.2f}: the excess-parameter decay, left out, is loaded onto R_D*.\n"
        "- 4 epochs: a negligible change in loss against unique data at the same compute (Figure 3).\n"
        f"- Masked diffusion: R_D* about {DIFFUSION_R_D_STAR:g} (Prabhudesai et al., a fit of the same form).\n"
        "- The fitted runs: 7.1M to 8.7B parameters, 100M to 178B unique tokens, 1 to 9,000 epochs, GPT-2's "
        "50,257-piece vocabulary, 2,048 positions, C4's held-out loss in nats; the notebook's data cell leaves out "
        'runs by hand ("outliers removed"), among them runs that blew up past a uniform guess (1.5B parameters at '
        "660 epochs: 11.02 nats)."
    )
    cost_note: ClassVar[str] = (
        "`scale=laptop` is sized to finish in about 90 minutes on 2 CPU cores (one thread a run); the dry run "
        "(`dry_run=true`) prints every run, its FLOPs (lmpt's count and the paper's 6ND) and the time before "
        "anything starts. `scale=paper` plans the paper's smallest U (100M tokens of C4) with a ladder from the "
        "paper's smallest model up, GPT-2's vocabulary and 2,048 positions: run it with `device=gpu` or "
        "`launcher=slurm` (its dry run states its GPU-hours). Every grid key changes the grid: `ladder`, `budgets`, "
        "`unique_tokens`, `epochs`, `corpus`, and `seeds`."
    )
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

    # -- the plan ---------------------------------------------------------------------------------------------------
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
            shape.flops_per_token * cell.tokens,
            6.0 * shape.parameters * cell.tokens,
        )

    # -- analysis ---------------------------------------------------------------------------------------------------
    def analyse(self, finished: list[FinishedRun]) -> Findings:
        planned = self.runs()
        done = {run.planned.name for run in finished}
        points = [_point(run) for run in finished]
        fits = {
            objective: self._fit(
                objective,
                [p for p in points if p.objective == objective],
                [r.name for r in planned if r.labels["objective"] == objective and r.name not in done],
            )
            for objective in OBJECTIVES
        }
        recovered = recover_constants(fits[AR].both, planned)
        conditions = self._conditions(planned, recovered)
        named = {c.name: c for c in conditions}
        scale = (
            "parameters",
            "unique tokens U",
            "epochs",
            "a compute-optimal rung at each budget",
            "the base law's runs",
        )
        scale_conditions = [named[n] for n in scale]
        identify = [named[n] for n in ("excess parameters", "the grid identifies the law") if n in named]
        clm_loss = named["loss (clm)"]
        free = self._free(points, planned, done)
        claims = [
            _star_claim(
                "R_D* of autoregression is 15.4",
                fits[AR],
                "r_d_star",
                PAPER_LAW.r_d_star,
                [*scale_conditions, *identify, clm_loss],
            ),
            _star_claim(
                "R_N* of autoregression is 5.3",
                fits[AR],
                "r_n_star",
                PAPER_LAW.r_n_star,
                [*scale_conditions, *identify, clm_loss],
            ),
            free["claim"],
            _diffusion_claim(fits, [named["parameters (diffusion)"], *identify[:1], named["loss (mdlm)"]]),
        ]
        sections = [
            ("The fit: R_D* and R_N* with their 95% intervals", _fit_section(fits)),
            ("Is 4 epochs nearly free?", free["section"]),
            ("Runs left out of the fit", _left_out_section(fits)),
            ("Every run", _every_run_section(finished, fits)),
        ]
        return Findings(claims, conditions, _headline(fits, free["share"]), sections, self._plot(finished, fits))

    def _fit(self, objective: str, points: list[LossPoint], missing: list[str]) -> Fitted:
        kept, left_out = include_points(points, vocab_size=self.recipe.vocab)
        fitted = Fitted(objective, kept, left_out, missing)
        try:
            base = fit_base_law(kept, starts=FIT_STARTS)  # stage 1, the same for both fits
        except LmptError as exc:
            fitted.notes.append(f"no fit: {exc}")
            return fitted
        for decay in Decay:
            try:
                setattr(fitted, decay.value, fit_law(kept, decay=decay, base=base))
                ci = bootstrap_stars(kept, decay=decay, resamples=BOOTSTRAP)
                setattr(fitted, f"{decay.value}_ci", ci)
            except LmptError as exc:
                fitted.notes.append(f"{decay} decay: {exc}")
        return fitted

    def _free(self, points: list[LossPoint], planned: list[PlannedRun], done: set[str]) -> dict:
        """ "4 epochs nearly free" for clm: at the largest budget D whose D/4 is a U of the grid, 4 epochs of D/4
        against 1 epoch of D, seed by seed, at the budget's compute-optimal rung (every rung in the table)."""
        pairs = [d for d in self.budgets if d % FREE_EPOCHS == 0 and d // FREE_EPOCHS in self.unique]
        pairs = pairs if FREE_EPOCHS in self.epochs else []
        claim_name = "4 epochs of repeated data are nearly free (autoregression)"
        if not pairs:
            why = f"the grid has no budget D with D/{FREE_EPOCHS} among its unique tokens at {FREE_EPOCHS} epochs"
            claim = judge(claim_name, Evidence.missing, "", [], why)
            return {"claim": claim, "section": why + ".", "share": ""}
        budget = max(pairs)
        once_cell = next(c for c in self.cells() if c.unique == budget and c.tokens <= c.unique)
        best = min(self.rungs(once_cell), key=lambda s: abs(math.log(s.parameters / optimal_parameters(budget))))
        loss = {p.name: p.loss for p in points}
        rows, verdict_diffs, verdict_once, lost = [], [], [], []
        for objective in OBJECTIVES:
            for shape in self.rungs(once_cell):
                once, four = (
                    {r.labels["seed"]: r.name for r in planned if _is(r, objective, shape, unique, epochs)}
                    for unique, epochs in ((budget, 1.0), (budget // FREE_EPOCHS, FREE_EPOCHS))
                )
                diffs, singles = [], []
                for seed, name in once.items():  # paired by seed
                    one, repeated = loss.get(name, math.nan), loss.get(four[seed], math.nan)
                    if math.isfinite(one) and math.isfinite(repeated):
                        diffs.append(repeated - one)
                        singles.append(one)
                if objective == AR and shape == best:
                    verdict_diffs, verdict_once = diffs, singles
                    lost = [name for name in [*once.values(), *four.values()] if name not in done]
                rows.append(_free_row(objective, shape, diffs, singles, shape == best))
        conditions = self._free_conditions(budget, best)
        figure, why, headline = "", "", ""
        if lost:
            evidence, why = Evidence.missing, _missing_text(lost)
        elif len(verdict_diffs) < 2:
            evidence, why = Evidence.undecided, "fewer than 2 seeds with both runs: no interval"
        else:
            span = seed_interval(verdict_diffs)
            low, high = span if span is not None else (math.nan, math.nan)
            margin = FREE_MARGIN * statistics.fmean(verdict_once)
            evidence = within_margin(low, high, margin)
            share = statistics.fmean(verdict_diffs) / statistics.fmean(verdict_once)
            headline = f"4 epochs cost clm {share:+.1%}"
            figure = (
                f"{FREE_EPOCHS} epochs of {budget // FREE_EPOCHS:,} tokens against 1 of {budget:,} at w{best.width}: "
                f"{statistics.fmean(verdict_diffs):+.4f} nats [{low:+.4f}, {high:+.4f}] ({share:+.2%}), margin "
                f"±{margin:.4f}"
            )
        claim = judge(claim_name, evidence, figure, conditions, why)
        header = [
            "objective",
            "width",
            f"1 epoch of {budget:,} (nats)",
            f"{FREE_EPOCHS} epochs of {budget // 4:,}",
            "difference [95% t, paired by seed]",
            "share of the 1-epoch loss",
            "1% margin",
            "reads",
        ]
        note = (
            f"The same compute (D = {budget:,} tokens) spent once over D unique tokens or {FREE_EPOCHS} times over "
            f"D/{FREE_EPOCHS}. The verdict is read at w{best.width}, the rung nearest the budget's compute-optimal "
            f"size ({optimal_parameters(budget):,.0f} parameters at {TOKENS_PER_PARAMETER:g} tokens a parameter)."
        )
        return {"claim": claim, "section": "\n".join(markdown_table(header, rows)) + "\n\n" + note, "share": headline}

    def _free_conditions(self, budget: int, best: Shape) -> list[Condition]:
        ratio = best.parameters / optimal_parameters(budget)
        return [
            _parameters_condition(self.ladder, PAPER_PARAMETERS[0], "the paper's smallest model"),
            Condition(
                "a compute-optimal rung at the compared budget",
                f"Figure 3's models are compute-optimal for their budget ({TOKENS_PER_PARAMETER:g} tokens a parameter)",
                f"w{best.width}: {budget / best.parameters:.3g} tokens a parameter ({ratio:.2g}x the optimal size)",
                1 / OPTIMAL_FACTOR <= ratio <= OPTIMAL_FACTOR,
            ),
            self._loss_condition(AR),
        ]

    def _loss_condition(self, objective: str) -> Condition:
        if objective == AR:
            return Condition(
                "loss (clm)",
                "C4's held-out cross-entropy, nats a token",
                f"held-out nats a token on {self.corpus}'s held-out windows (exact)",
                True,
            )
        return Condition(
            "loss (mdlm)",
            "Prabhudesai et al.: the diffusion model's held-out loss (its bound)",
            "the diffusion bound in nats a token on the same windows: an upper bound on the negative log-likelihood",
            None,
        )

    def _conditions(self, planned: list[PlannedRun], recovered: tuple[float, float] | None) -> list[Condition]:
        """The conditions table, computed from the grid (the planned runs, one seed and objective)."""
        runs = [r.labels for r in planned if r.labels["seed"] == 0 and r.labels["objective"] == AR]
        excess = [r["parameters"] / optimal_parameters(r["seen"]) for r in runs]
        epochs = [r["tokens"] / r["seen"] for r in runs]
        repeated = sorted({r["seen"] for r in runs if r["tokens"] > r["seen"]})
        once = sorted({r["seen"] for r in runs if r["tokens"] <= r["seen"]})
        near = self.stage_one_runs()
        conditions = [
            _parameters_condition(self.ladder, PAPER_PARAMETERS[0], "the paper's smallest model"),
            replace(
                _parameters_condition(self.ladder, PRABHUDESAI_PARAMETERS, "Prabhudesai et al.'s smallest model"),
                name="parameters (diffusion)",
                paper=f"{PRABHUDESAI_PARAMETERS / 1e6:g}M to 2.5B (Prabhudesai et al.)",
            ),
            Condition(
                "non-embedding parameters",
                "not counted apart (the paper's counts include the embedding)",
                ", ".join(
                    f"w{s.width} {s.matmul_parameters:,} ({s.matmul_parameters / s.parameters:.0%})"
                    for s in self.ladder
                ),
            ),
        ]
        for shape in self.ladder:
            mine = [r["tokens"] / r["parameters"] for r in runs if r["width"] == shape.width]
            conditions.append(
                Condition(
                    f"tokens per parameter, w{shape.width} ({shape.parameters:,} parameters)",
                    f"{PAPER_TOKENS_PER_PARAMETER[0]:g} to {PAPER_TOKENS_PER_PARAMETER[1]:,} (compute-optimal: "
                    f"{TOKENS_PER_PARAMETER:g})",
                    f"{min(mine):.3g} to {max(mine):.3g}: {min(mine) / TOKENS_PER_PARAMETER:.2g}x to "
                    f"{max(mine) / TOKENS_PER_PARAMETER:.2g}x compute-optimal",
                )
            )
        optimal = []
        for cell in self.cells():
            if cell.tokens <= cell.unique:
                best = min(
                    self.rungs(cell), key=lambda s: abs(math.log(s.parameters / optimal_parameters(cell.tokens)))
                )
                optimal.append((cell.tokens, best, best.parameters / optimal_parameters(cell.tokens)))
        conditions += [
            Condition(
                "a compute-optimal rung at each budget",
                "Chinchilla's iso-FLOP points: sizes around each budget's optimum",
                "; ".join(f"{b:,}: w{s.width} ({r:.2g}x)" for b, s, r in optimal),
                all(1 / OPTIMAL_FACTOR <= r <= OPTIMAL_FACTOR for _, _, r in optimal),
                f"within {OPTIMAL_FACTOR:g}x of D / {TOKENS_PER_PARAMETER:g}",
            ),
            Condition(
                "excess parameters",
                f"N / N_opt(U) from {PAPER_EXCESS[0]:g} to {PAPER_EXCESS[1]:g}",
                f"N / N_opt(U) from {min(excess):.2g} to {max(excess):.3g} (N_opt(U) = U / {TOKENS_PER_PARAMETER:g})",
                min(excess) <= 1 < max(excess),
                "sizes on both sides of N_opt(U) tell R_N* from R_D*",
            ),
            Condition(
                "unique tokens U",
                f"{PAPER_UNIQUE[0]:,.0f} to {PAPER_UNIQUE[1]:,.0f}",
                f"{', '.join(f'{u:,}' for u in repeated)} repeated; {once[0]:,} to {once[-1]:,} read once"
                if once
                else f"{', '.join(f'{u:,}' for u in repeated)} repeated",
                min(repeated + once) >= PAPER_UNIQUE[0],
            ),
            Condition(
                "epochs",
                f"{PAPER_EPOCHS[0]} to {PAPER_EPOCHS[1]:,}",
                f"{min(epochs):g} to {max(epochs):.3g}",
                max(epochs) - 1 >= PAPER_LAW.r_d_star,
                f"past R_D* = {PAPER_LAW.r_d_star:.1f} repetitions, where the decay bends",
            ),
            Condition(
                "the base law's runs",
                "stage 1 on Chinchilla's 54 C4 iso-FLOP points (E, A, B, alpha = beta)",
                f"stage 1 on the grid's {len(near)} single-epoch runs, {len({n for n, _ in near})} sizes at "
                f"{len({d for _, d in near})} token counts, each at most the compute-optimal size",
                len(near) >= 4,
                "a larger single-epoch model loses to excess parameters, which stage 1 does not model",
            ),
        ]
        if recovered is not None:
            ok = all(
                abs(found / paper - 1) <= RECOVERY_TOLERANCE
                for found, paper in zip(recovered, (PAPER_LAW.r_d_star, PAPER_LAW.r_n_star), strict=True)
            )
            conditions.append(
                Condition(
                    "the grid identifies the law",
                    f"R_D* {PAPER_LAW.r_d_star:.2f}, R_N* {PAPER_LAW.r_n_star:.2f}",
                    "refitted from losses the law makes at this grid's runs (clm's stage 1, the paper's R_D* and "
                    f"R_N*): R_D* {recovered[0]:.3g}, R_N* {recovered[1]:.3g}",
                    ok,
                    f"within {RECOVERY_TOLERANCE:.0%} of the constants it was made with",
                )
            )
        conditions += [
            Condition("vocabulary", f"{PAPER_VOCAB:,} (GPT-2's)", f"{self.recipe.vocab:,}"),
            Condition("context", f"{PAPER_CONTEXT:,} tokens", f"{self.recipe.seq_len:,} tokens"),
            Condition(
                "recipe",
                "their Megatron-DeepSpeed recipe, one per size",
                "lmpt's default optimizer, learning rate and schedule for every size and objective (not searched); "
                "warm-up a tenth of each run",
            ),
            self._loss_condition(AR),
            self._loss_condition(DIFFUSION),
        ]
        return conditions

    def _plot(self, finished: list[FinishedRun], fits: dict[str, Fitted]) -> Figure:
        """Held-out loss against epochs, a panel per objective and U: each rung's runs in the fit (seed means, their
        spread), those left out (x), and the law fitted with both decays (lines)."""
        figure = Figure(figsize=(5 * len(self.unique), 4.2 * len(OBJECTIVES)), layout="constrained")
        axes = figure.subplots(len(OBJECTIVES), len(self.unique), squeeze=False)
        kept = {p.name for fitted in fits.values() for p in fitted.kept}
        for row, objective in enumerate(OBJECTIVES):
            for col, unique in enumerate(self.unique):
                ax = axes[row][col]
                for i, shape in enumerate(self.ladder):
                    cells: dict[float, list[float]] = {}
                    for run in finished:
                        labels = run.planned.labels
                        if (labels["objective"], labels["width"], labels["unique"]) != (objective, shape.width, unique):
                            continue
                        epochs = labels["tokens"] / labels["seen"]
                        if run.planned.name in kept:
                            cells.setdefault(epochs, []).append(_nats(run))
                        elif math.isfinite(_nats(run)):
                            ax.plot([epochs], [_nats(run)], "x", color=f"C{i}")
                    xs = sorted(cells)
                    ys = [statistics.fmean(cells[x]) for x in xs]
                    spread = [statistics.stdev(cells[x]) if len(cells[x]) > 1 else 0.0 for x in xs]
                    ax.errorbar(xs, ys, yerr=spread, fmt="o", color=f"C{i}", capsize=3, label=f"w{shape.width}")
                    law = fits[objective].both
                    if law is not None:
                        grid = np.geomspace(1, max(self.epochs), 60)
                        ax.plot(grid, law.predict(shape.parameters, grid * unique, unique), "-", color=f"C{i}")
                ax.set_xscale("log", base=2)
                ax.set_xlabel(f"epochs over U = {unique:,} tokens")
                ax.set_ylabel(f"{objective} held-out nats a token" + bound_note(objective))
                ax.set_title(f"{objective}, U = {unique:,}: runs (dots; x left out) and the fitted law", fontsize=9)
                ax.legend(fontsize=7)
        return figure


def _listed(values: Sequence[str]) -> str:
    return f"[{','.join(values)}]"


def _point(run: FinishedRun) -> LossPoint:
    labels = run.planned.labels
    return LossPoint(
        float(labels["parameters"]),
        float(labels["tokens"]),
        float(labels["seen"]),
        _nats(run),
        seed=int(labels["seed"]),
        objective=str(labels["objective"]),
        name=run.planned.name,
    )


def _nats(run: FinishedRun) -> float:
    """The run's held-out loss in nats a token (its last val_bits_per_token x ln 2; NaN when never logged)."""
    return run.last(BITS_PER_TOKEN) * math.log(2)


def _is(run: PlannedRun, objective: str, shape: Shape, unique: int, epochs: float) -> bool:
    """Whether `run` is `objective`'s run of `shape` over `unique` tokens at `epochs`."""
    cell = (run.labels["objective"], run.labels["width"], run.labels["unique"], run.labels["epochs"])
    return cell == (objective, shape.width, unique, epochs)


def _missing_text(names: Sequence[str]) -> str:
    shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
    return f"{len(names)} run(s) not completed: {shown}"


def _parameters_condition(ladder: Sequence[Shape], smallest: float, whose: str) -> Condition:
    params = [s.parameters for s in ladder]
    return Condition(
        "parameters",
        f"{PAPER_PARAMETERS[0] / 1e6:.1f}M to {PAPER_PARAMETERS[1] / 1e9:.1f}B (with the embedding)",
        f"{min(params):,} to {max(params):,} (" + ", ".join(f"w{s.width}" for s in ladder) + ")",
        max(params) >= smallest,
        f"the largest rung against {whose}",
    )


def recover_constants(law: DataConstrainedLaw | None, planned: list[PlannedRun]) -> tuple[float, float] | None:
    """R_D* and R_N* fitted as the runs are (stage 1, then both decays) to losses the law makes, clm's fitted stage 1
    with the paper's R_D* and R_N*, at every cell of the grid: whether the grid can give the constants back at all."""
    if law is None:
        return None
    made = replace(law, r_d_star=PAPER_LAW.r_d_star, r_n_star=PAPER_LAW.r_n_star)
    cells = {(r.labels["parameters"], r.labels["tokens"], r.labels["seen"]) for r in planned}
    points = [LossPoint(n, d, u, float(made.predict(n, d, u))) for n, d, u in sorted(cells)]
    try:
        found = fit_law(points, starts=FIT_STARTS)
    except LmptError:
        return None
    return found.r_d_star, found.r_n_star


def _interval(fitted: Fitted, decay: Decay, star: str) -> tuple[float, float]:
    ci = fitted.both_ci if decay is Decay.both else fitted.data_ci
    span = None if ci is None else (ci.r_d_star if star == "r_d_star" else ci.r_n_star)
    return span if span is not None else (math.nan, math.nan)


def _star_text(value: float) -> str:
    if value >= 0.99 * R_STAR_BOUNDS[1]:
        return f"≥ {R_STAR_BOUNDS[1]:,.0f}"
    if value <= 1.01 * R_STAR_BOUNDS[0]:
        return f"≤ {R_STAR_BOUNDS[0]:g}"
    return f"{value:.3g}"


def _star_figure(fitted: Fitted, star: str, decay: Decay = Decay.both) -> str:
    law = fitted.both if decay is Decay.both else fitted.data
    if law is None:
        return "—"
    low, high = _interval(fitted, decay, star)
    point = _star_text(getattr(law, star))
    return point if math.isnan(low) else f"{point} [{_star_text(low)}, {_star_text(high)}]"


def _star_claim(claim: str, fitted: Fitted, star: str, paper: float, conditions: list[Condition]) -> ClaimVerdict:
    symbol = "R_D*" if star == "r_d_star" else "R_N*"
    if fitted.missing:
        return judge(claim, Evidence.missing, "", conditions, _missing_text(fitted.missing))
    if fitted.both is None:
        return judge(claim, Evidence.undecided, "", conditions, "; ".join(fitted.notes) or "no fit")
    low, high = _interval(fitted, Decay.both, star)
    figure = f"{symbol} = {_star_figure(fitted, star)} against the paper's {paper:.2f}"
    why = "" if math.isfinite(low) else "no interval: " + ("; ".join(fitted.notes) or "one seed")
    return judge(claim, inside(low, high, paper), figure, conditions, why)


def _diffusion_claim(fits: dict[str, Fitted], conditions: list[Condition]) -> ClaimVerdict:
    """Masked diffusion's R_D* above autoregression's: the interval of log(R_D*(clm) / R_D*(mdlm)) from the two
    intervals' far ends (a conservative comparison) below 0."""
    claim = "R_D* of masked diffusion exceeds autoregression's"
    lost = fits[AR].missing + fits[DIFFUSION].missing
    if lost:
        return judge(claim, Evidence.missing, "", conditions, _missing_text(lost))
    if fits[AR].both is None or fits[DIFFUSION].both is None:
        notes = fits[AR].notes + fits[DIFFUSION].notes
        return judge(claim, Evidence.undecided, "", conditions, "; ".join(notes) or "no fit")
    (clm_low, clm_high), (mdlm_low, mdlm_high) = (_interval(fits[o], Decay.both, "r_d_star") for o in OBJECTIVES)
    low, high = math.log(clm_low / mdlm_high), math.log(clm_high / mdlm_low)
    figure = (
        f"mdlm {_star_figure(fits[DIFFUSION], 'r_d_star')} against clm {_star_figure(fits[AR], 'r_d_star')} "
        f"(Prabhudesai et al.: about {DIFFUSION_R_D_STAR:g} against {PAPER_LAW.r_d_star:.1f})"
    )
    return judge(claim, below(low, high, 0.0), figure, conditions, "" if math.isfinite(low) else "no interval")


def _free_row(objective: str, shape: Shape, diffs: list[float], singles: list[float], best: bool) -> list[str]:
    width = f"w{shape.width}" + (" (compute-optimal)" if best else "")
    if not diffs:
        return [objective, width, "—", "—", "—", "—", "—", "no runs"]
    span = seed_interval(diffs)
    mean, base = statistics.fmean(diffs), statistics.fmean(singles)
    margin = FREE_MARGIN * base
    low, high = span if span is not None else (math.nan, math.nan)
    reads = {Evidence.shows: "nearly free", Evidence.contradicts: "costs over 1%", Evidence.undecided: "cannot tell"}
    return [
        objective,
        width,
        f"{base:.4f}",
        f"{base + mean:.4f}",
        f"{mean:+.4f} [{low:+.4f}, {high:+.4f}]" if span else f"{mean:+.4f} (one seed)",
        f"{mean / base:+.2%}",
        f"±{margin:.4f}",
        reads[within_margin(low, high, margin)],
    ]


def _fit_section(fits: dict[str, Fitted]) -> str:
    rows = []
    for objective, fitted in fits.items():
        for decay, law in ((Decay.both, fitted.both), (Decay.data, fitted.data)):
            paper_d = (f"{PAPER_LAW.r_d_star:.2f}" if decay is Decay.both else f"{PAPER_DATA_ONLY_R_D_STAR:.2f}") + (
                f" (mdlm: about {DIFFUSION_R_D_STAR:g})" if objective == DIFFUSION and decay is Decay.both else ""
            )
            rows.append(
                [
                    objective,
                    "both (the paper's)" if decay is Decay.both else "data only (one term)",
                    _star_figure(fitted, "r_d_star", decay),
                    paper_d,
                    _star_figure(fitted, "r_n_star", decay) if decay is Decay.both else "— (not decayed)",
                    f"{PAPER_LAW.r_n_star:.2f}" if decay is Decay.both else "—",
                    f"E {law.E:.3g}, A {law.A:.3g}, B {law.B:.3g}, alpha = beta {law.alpha:.3f}" if law else "—",
                    f"{len(fitted.kept)} ({len(fitted.left_out)} left out)",
                ]
            )
    header = [
        "objective",
        "decays",
        "R_D* [95%]",
        "paper's R_D*",
        "R_N* [95%]",
        "paper's R_N*",
        "stage 1 (nats)",
        "runs in the fit",
    ]
    notes = [n for f in fits.values() for n in f.notes]
    method = (
        "Both fits are the notebook's: stage 1 fits Chinchilla's E + A/N^alpha + B/D^beta (alpha = beta) through "
        "the single-epoch runs (each at most the compute-optimal size: the part Chinchilla's "
        "C4 points play in the notebook), then R_D* and R_N* (or R_D* alone, N' = N) are fitted jointly over every "
        f"run in the fit with stage 1 held, each by a Huber loss (delta {HUBER_DELTA:g}) on log loss from a grid of "
        f"starts. Intervals: a percentile bootstrap ({BOOTSTRAP} resamples) that draws each cell's seeds again and "
        f"refits both stages. An end at {R_STAR_BOUNDS[1]:,.0f} means the runs show no decay the fit can see. "
        "Losses are held-out nats a token; mdlm's are its diffusion bound (an upper bound), so its law's level is not "
        "comparable with clm's, its decays are."
    )
    table = "\n".join(markdown_table(header, rows))
    return f"{table}\n\n{method}" + ("\n\n" + "\n".join(f"- {n}" for n in notes) if notes else "")


def _left_out_section(fits: dict[str, Fitted]) -> str:
    rows = [
        [
            p.name,
            p.objective,
            f"{p.params:,.0f}",
            f"{p.unique:,.0f}",
            f"{p.tokens / p.unique:.3g}",
            f"{p.loss:.4f}",
            reason,
        ]
        for fitted in fits.values()
        for p, reason in fitted.left_out
    ]
    rule = (
        "The rule (`include_points`): a run whose held-out loss is not finite, or is at or above ln V nats (a uniform "
        "guess over the vocabulary's V pieces), diverged and is left out. The notebook's own removals go further by "
        'hand (its "outliers removed" cell drops runs whose loss rose with more epochs, among others); they are '
        "not a rule, so lmpt keeps such runs, and the Huber loss on log loss limits their pull."
    )
    if not rows:
        return rule + "\n\nNo run was left out."
    header = ["run", "objective", "parameters", "unique tokens", "epochs", "held-out nats", "why"]
    return rule + "\n\n" + "\n".join(markdown_table(header, rows))


def _every_run_section(finished: list[FinishedRun], fits: dict[str, Fitted]) -> str:
    left = {p.name: reason for f in fits.values() for p, reason in f.left_out}
    rows = []
    for run in sorted(
        finished,
        key=lambda r: (
            r.planned.labels["objective"],
            r.planned.labels["width"],
            r.planned.labels["unique"],
            r.planned.labels["epochs"],
            r.planned.labels["seed"],
        ),
    ):
        labels = run.planned.labels
        nats = _nats(run)
        rows.append(
            [
                run.planned.name,
                labels["objective"],
                f"w{labels['width']}",
                f"{labels['parameters']:,}",
                f"{labels['seen']:,}",
                f"{labels['tokens'] / labels['seen']:.4g}",
                f"{labels['tokens']:,}",
                f"{labels['tokens'] / labels['parameters']:.3g}",
                str(labels["seed"]),
                f"{nats:.4f}",
                f"{run.last('val_bits_per_token'):.4f}",
                "left out: " + left[run.planned.name] if run.planned.name in left else "yes",
            ]
        )
    header = [
        "run",
        "objective",
        "width",
        "parameters",
        "unique tokens",
        "epochs",
        "tokens",
        "tokens a parameter",
        "seed",
        "held-out nats",
        "bits",
        "in the fit",
    ]
    return (
        "Each completed run, each seed: the figures every fit and interval above is made from (nats = bits x ln 2)."
        "\n\n" + "\n".join(markdown_table(header, rows))
    )


def _headline(fits: dict[str, Fitted], free: str) -> str:
    parts = [
        f"R_D* clm {_star_figure(fits[AR], 'r_d_star')} (paper 15.39), R_N* {_star_figure(fits[AR], 'r_n_star')} "
        "(5.31)",
        f"mdlm R_D* {_star_figure(fits[DIFFUSION], 'r_d_star')}",
    ]
    return "; ".join(parts + ([free] if free else []))
