"""Repetition is nearly free up to about 4 epochs, then fades with a constant R_D* (Muennighoff et al. 2023), and
fades far more slowly for masked diffusion (Prabhudesai et al. 2025); regularised autoregression as the control Ni et
al. 2025 ask for.

The iso-FLOP design: one model (micro, a 2,048-piece vocabulary) and one training budget, D tokens (STEPS optimizer
steps of 16 x 128), spent as `epochs` passes over U = D / epochs unique tokens (data.unique_tokens: the first U tokens
of WikiText-2's text, the same for every run), for clm and mdlm over `seeds` seeds. Beside them, each U read once
(D / epochs tokens, fresh data): the runs that fit each objective's data law L(D) = E + B / D^beta, in which
repetition is then read as effective data,

    D' = U + U R_D* (1 - exp(-R_D / R_D*)),   R_D = epochs - 1,

the form and the constant of the paper (huggingface/datablations: R_D* = 15.39 for autoregression). R_D* is fitted
per objective on the repeated runs with the data law held, and its 95% interval is a percentile bootstrap over seeds
(scipy.stats.bootstrap: each cell's seeds drawn again, both fits redone). At the largest epoch count, clm with a share
of its inputs replaced by [MASK] (objective.input_mask_prob, at two rates) and clm with dropout are the regularised
controls. Every run is measured in held-out bits per token on the same windows (exact for clm, the diffusion bound
for mdlm)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import ClassVar

import numpy as np
from matplotlib.figure import Figure

from lmpt.reproduce.fim import FREE, free_or_not, interval
from lmpt.reproduce.reproduction import (
    TOKENS_PER_STEP,
    Findings,
    FinishedRun,
    PlannedRun,
    Reproduction,
    bound_note,
    mean_cell,
)
from lmpt.study.record import markdown_table

STEPS = 200
"""The training budget of every iso-FLOP run: 200 steps, 409,600 tokens (the bundled WikiText-2 text holds 434k)."""
EPOCHS = (1, 2, 4, 8, 16, 32, 64)
FRESH = (2, 4, 8, 16)
"""The fresh-data runs beside the iso-FLOP ones: U = D / epochs read once (the data law's points below D); past 16
a run would be a handful of steps."""
FLOPS_PER_TOKEN = 1.622e6
"""Training FLOPs per token of the micro model at a 2,048-piece vocabulary and sequence 128 (as its runs log them)."""
MODEL_KEYS = ("data=wikitext", "model=micro", "tokenizer.vocab_size=2048")
COMMON = ("trainer.eval_every=0", "trainer.sample_tokens=0")
CONTROLS = {
    "clm-mask10": ("objective=clm", "objective.input_mask_prob=0.1"),
    "clm-mask25": ("objective=clm", "objective.input_mask_prob=0.25"),
    "clm-dropout10": ("objective=clm", "model.dropout=0.1"),
}
"""Regularised autoregression at the largest epoch count (Ni et al. 2025's ablations): inputs masked at two rates,
and dropout."""
AR = "clm"
DIFFUSION = "mdlm"
"""The two arms: autoregression and masked diffusion (their runs' objectives)."""
OBJECTIVES = (AR, DIFFUSION)
PAPER_R = {AR: 15.39, DIFFUSION: 500.0}
"""R_D* as published: 15.39 for autoregression (Muennighoff et al. 2023, the datablations README's fit), about 500
for masked diffusion (Prabhudesai et al. 2025)."""
R_RANGE = (0.1, 1.0e4)
"""The R_D* the fit searches; one at the top end is reported as 'at least' (the grid cannot tell larger apart)."""
FREE_EPOCHS = 4
FREE_MARGIN = 0.01
""""Nearly free": 4 epochs of D/4 within 1% of the bits per token of 1 epoch of D (the paired interval inside)."""
BOOTSTRAP = 999
LAW_REGIME = 8
"""R_D* is also fitted through 2 to 8 epochs alone: past them a small model repeating its data can end worse than
reading its unique tokens once (it overfits), which the law's form cannot express (D' is never below U)."""


def data_law(tokens: np.ndarray, e: float, b: float, beta: float) -> np.ndarray:
    return e + b / np.power(tokens, beta)


def effective_data(unique: np.ndarray, epochs: np.ndarray, r_star: float) -> np.ndarray:
    """D' of the paper: U + U R_D* (1 - exp(-(epochs - 1) / R_D*))."""
    return unique + unique * r_star * (1.0 - np.exp(-(epochs - 1.0) / r_star))


def fit_data_law(tokens: np.ndarray, bits: np.ndarray) -> tuple[float, float, float]:
    """(E, B, beta) of L(D) = E + B / D^beta through fresh-data points, least squares in bits per token: for each
    beta, E and B >= 0 are a non-negative linear fit (scipy.optimize.nnls); beta is searched on a log scale."""
    from scipy.optimize import minimize_scalar, nnls

    def solve(log_beta: float) -> tuple[float, np.ndarray]:
        design = np.stack([np.ones_like(tokens), np.power(tokens, -math.exp(log_beta))], axis=1)
        params, residual = nnls(design, bits)
        return residual, params

    low, high = math.log(0.01), math.log(3.0)
    grid = np.linspace(low, high, 60)
    best = grid[int(np.argmin([solve(x)[0] for x in grid]))]
    step = grid[1] - grid[0]
    found = minimize_scalar(
        lambda x: solve(x)[0], bounds=(max(low, best - step), min(high, best + step)), method="bounded"
    )
    (e, b) = solve(found.x)[1]
    return float(e), float(b), float(math.exp(found.x))


def fit_r_star(law: tuple[float, float, float], unique: np.ndarray, epochs: np.ndarray, bits: np.ndarray) -> float:
    """The R_D* whose effective data, through the data law, best gives the repeated runs' bits per token (squared
    error, searched on a log scale over R_RANGE)."""
    from scipy.optimize import minimize_scalar

    def error(log_r: float) -> float:
        predicted = data_law(effective_data(unique, epochs, math.exp(log_r)), *law)
        return float(np.sum((predicted - bits) ** 2))

    low, high = math.log(R_RANGE[0]), math.log(R_RANGE[1])
    grid = np.linspace(low, high, 61)  # the error can have flat stretches: start from the best of a coarse grid
    best = grid[int(np.argmin([error(x) for x in grid]))]
    step = grid[1] - grid[0]
    found = minimize_scalar(error, bounds=(max(low, best - step), min(high, best + step)), method="bounded")
    return float(math.exp(found.x))


class Repetition(Reproduction):
    name: ClassVar[str] = "repetition"
    title: ClassVar[str] = "repeated data: nearly free to 4 epochs, then fading with R_D* (Muennighoff et al. 2023)"
    paper: ClassVar[str] = (
        'Muennighoff, Rush, Barak, Le Scao, Piktus, Tazi, Pyysalo, Wolf and Raffel (2023), "Scaling Data-Constrained '
        'Language Models", arXiv:2305.16264; with Prabhudesai, Wu, Zadeh, Fragkiadaki and Pathak (2025), "Diffusion '
        'Beats Autoregressive in Data-Constrained Settings", arXiv:2507.15857, and Ni et al. (2025), "Diffusion '
        'Language Models are Super Data Learners"'
    )
    claim: ClassVar[str] = (
        "Muennighoff et al., Figures 3 to 5: at a fixed compute, training up to about 4 epochs on repeated data is "
        "almost as good as unique data, and the value of repeated tokens then decays with a constant R_D* = 15.4 "
        "(autoregression). Prabhudesai et al.: for masked diffusion R_D* is about 500. Ni et al., ablations: "
        "regularising autoregression (input corruption, dropout) narrows its loss under heavy repetition."
    )
    papers_figures: ClassVar[str] = (
        "- R_D* = 15.39 for autoregressive transformers (the datablations fit over models of 10M to 9B parameters "
        "and up to 1,500 epochs), with R_N* = 5.31 for excess parameters.\n"
        "- 4 epochs: 'negligible' change in loss against unique data (Figure 3's 8.7B-parameter model: 0.5% at most "
        "of the final loss); 40 epochs: repeated data is worth little.\n"
        "- R_D* about 500 for masked diffusion (Prabhudesai et al., their fit of the same form), about 30 times "
        "autoregression's.\n"
        "- Their models: 7M to 9B parameters, a 50k vocabulary, C4 and OSCAR; lmpt's: 0.24M parameters, a 2,048-piece "
        "vocabulary, WikiText-2's bundled text, 409,600 training tokens a run."
    )
    cost_note: ClassVar[str] = (
        "75 runs of the micro model (2 objectives x (7 iso-FLOP + 4 fresh) x 3 seeds, and 3 controls x 3 seeds), one "
        "thread each, one per core. The larger version is one key away on a machine with more cores: "
        "`lmpt-reproduce repetition seeds=10 slots=32` plans 250 runs, 1.4 slot-hours at this CPU's rates, about 3 "
        "minutes on a 32-core node, with every interval about half as wide; the dry run (`dry_run=true`) states the "
        "time before anything starts. A larger model or more text than the bundled WikiText-2 needs the grid's "
        "constants (STEPS, MODEL_KEYS) changed: the text holds 434k training tokens, the budget takes 409,600."
    )

    def runs(self) -> list[PlannedRun]:
        planned = []
        tokens = STEPS * TOKENS_PER_STEP
        for seed in range(self.seeds):
            for objective in OBJECTIVES:
                for epochs in EPOCHS:
                    planned.append(self._run(objective, (f"objective={objective}",), epochs, STEPS, seed, "repeated"))
                for epochs in FRESH:
                    planned.append(
                        self._run(objective, (f"objective={objective}",), epochs, STEPS // epochs, seed, "fresh")
                    )
            for arm, keys in CONTROLS.items():
                planned.append(self._run(arm, keys, EPOCHS[-1], STEPS, seed, "repeated"))
        assert all(run.labels["unique"] * run.labels["read"] <= tokens for run in planned)
        return planned

    def _run(self, arm: str, keys: tuple[str, ...], epochs: int, steps: int, seed: int, kind: str) -> PlannedRun:
        unique = STEPS * TOKENS_PER_STEP // epochs
        return PlannedRun(
            f"{arm}-{kind}-{epochs}x-seed{seed}",
            (
                *keys,
                *MODEL_KEYS,
                f"data.unique_tokens={unique}",
                f"trainer.max_steps={steps}",
                f"scheduler.warmup_steps={max(1, steps // 10)}",  # a tenth of every run (20: the default at 200)
                f"trainer.seed={seed}",
                *COMMON,
            ),
            {
                "objective": arm,
                "model": "micro",
                "epochs": epochs,
                "kind": kind,
                "unique": unique,
                "read": steps * TOKENS_PER_STEP / unique,
                "seed": seed,
            },
            FLOPS_PER_TOKEN * steps * TOKENS_PER_STEP,
        )

    # -- analysis ---------------------------------------------------------------------------------------------------
    def analyse(self, finished: list[FinishedRun]) -> Findings:
        bits = _bits_by_cell(finished)
        rows, fits = [], {}
        for objective in OBJECTIVES:
            for kind, grid in (("repeated", EPOCHS), ("fresh", (1, *FRESH))):
                cells = []
                for epochs in grid:
                    values = bits.get((objective, "repeated" if epochs == 1 else kind, epochs), [])
                    cells.append(mean_cell(values))
                label = "iso-FLOP: D over U = D/epochs" if kind == "repeated" else "fresh: U = D/epochs read once"
                rows.append([objective, label, *cells, *[""] * (len(EPOCHS) - len(grid))])
            fits[objective] = self._fit(bits, objective, EPOCHS[-1])
            fits[f"{objective}, to {LAW_REGIME} epochs"] = self._fit(bits, objective, LAW_REGIME)
        table = markdown_table(["objective", "runs", *[f"{e} epochs" for e in EPOCHS]], rows)
        fit_rows = [
            [
                objective,
                _r_text(fit),
                f"{PAPER_R[objective.split(',')[0]]:g}",
                f"E {fit['law'][0]:.2f}, B {fit['law'][1]:.3g}, beta {fit['law'][2]:.3f}" if fit else "—",
                f"{fit['rmse']:.3f}" if fit else "—",
            ]
            for objective, fit in fits.items()
        ]
        fit_table = markdown_table(
            ["objective, epochs fitted", "R_D* [95% bootstrap, seeds]", "paper's", "data law (bits per token)", "RMSE"],
            fit_rows,
        )
        free_rows, free_words, costs = [], {}, {}
        for objective in OBJECTIVES:
            one = bits.get((objective, "repeated", 1), [])
            four = bits.get((objective, "repeated", FREE_EPOCHS), [])
            n = min(len(one), len(four))
            if n < 2:
                continue
            mean, low, high = interval([f - o for f, o in zip(four[:n], one[:n], strict=True)])
            margin = FREE_MARGIN * statistics.fmean(one)
            free_words[objective] = free_or_not(low, high, margin)
            costs[objective] = mean / statistics.fmean(one)
            free_rows.append(
                [
                    objective,
                    f"{statistics.fmean(one):.3f}",
                    f"{statistics.fmean(four):.3f}",
                    f"{mean:+.3f} [{low:+.3f}, {high:+.3f}]",
                    f"±{margin:.3f}",
                    free_words[objective],
                ]
            )
        header = ["objective", "1 epoch of D", "4 epochs of D/4", "difference [95% t, by seed]", "1% margin", "reads"]
        free_table = markdown_table(header, free_rows)
        control_rows = []
        for arm in (AR, *CONTROLS, DIFFUSION):
            values = bits.get((arm, "repeated", EPOCHS[-1]), [])
            control_rows.append([arm, _arm_keys(arm), mean_cell(values)])
        control_table = markdown_table(["arm", "keys", f"bits per token at {EPOCHS[-1]} epochs"], control_rows)
        verdict, headline = self._verdict(fits, free_words, costs, _first_worse(bits))
        sections = [
            ("What R_D* each objective shows", "\n".join(fit_table) + "\n\n" + _fit_note()),
            ("Is 4 epochs nearly free?", "\n".join(free_table)),
            ("Held-out bits per token, every cell", _cells_note() + "\n\n" + "\n".join(table)),
            ("Regularised autoregression against repetition", "\n".join(control_table) + "\n\n" + _control_note()),
        ]
        return Findings(verdict, headline, sections, self._plot(bits, fits))

    def _fit(self, bits: dict[tuple[str, str, int], list[float]], objective: str, most: int) -> dict | None:
        """The data law through the fresh points and R_D* through the repeated ones up to `most` epochs, with the
        bootstrap's interval over seeds; None when a cell has no completed run."""
        fresh_cells = [bits.get((objective, "repeated", 1), [])]
        fresh_cells += [bits.get((objective, "fresh", e), []) for e in FRESH]
        repeated_cells = [bits.get((objective, "repeated", e), []) for e in EPOCHS[1:] if e <= most]
        if any(not cell for cell in fresh_cells + repeated_cells):
            return None
        d = float(STEPS * TOKENS_PER_STEP)
        fresh_tokens = np.array([float(STEPS // e * TOKENS_PER_STEP) for e in (1, *FRESH)])  # as read
        epochs = np.array([e for e in EPOCHS[1:] if e <= most], dtype=float)
        unique = d / epochs

        def statistic(*cells: Sequence[float]) -> float:
            law = fit_data_law(fresh_tokens, np.array([np.mean(c) for c in cells[: len(fresh_cells)]]))
            repeated = np.array([np.mean(c) for c in cells[len(fresh_cells) :]])
            return math.log(fit_r_star(law, unique, epochs, repeated))

        cells = [np.asarray(c, dtype=float) for c in fresh_cells + repeated_cells]
        law = fit_data_law(fresh_tokens, np.array([c.mean() for c in cells[: len(fresh_cells)]]))
        repeated = np.array([c.mean() for c in cells[len(fresh_cells) :]])
        r_star = fit_r_star(law, unique, epochs, repeated)
        predicted = data_law(effective_data(unique, epochs, r_star), *law)
        rmse = float(np.sqrt(np.mean((predicted - repeated) ** 2)))
        low = high = math.nan
        if min(len(c) for c in cells) >= 2:
            from scipy.stats import bootstrap

            result = bootstrap(
                cells,
                statistic,
                n_resamples=BOOTSTRAP,
                vectorized=False,
                method="percentile",
                rng=np.random.default_rng(0),
            )
            low, high = math.exp(result.confidence_interval.low), math.exp(result.confidence_interval.high)
        return {"r": r_star, "low": low, "high": high, "law": law, "rmse": rmse}

    def _verdict(
        self, fits: dict[str, dict | None], free_words: dict[str, str], costs: dict[str, float], worse: int | None
    ) -> tuple[str, str]:
        clm, mdlm = fits.get(f"{AR}, to {LAW_REGIME} epochs"), fits.get(f"{DIFFUSION}, to {LAW_REGIME} epochs")
        if clm is None or mdlm is None:
            return "not enough completed runs to fit R_D*", "incomplete"
        paper_in = clm["low"] <= PAPER_R[AR] <= clm["high"]
        larger = mdlm["low"] > clm["high"]
        free = free_words.get(AR) == FREE
        parts = [
            f"R_D*(clm) = {_r_text(clm)} through 2-{LAW_REGIME} epochs against the paper's 15.4 "
            f"({'inside' if paper_in else 'outside'} the interval)",
            f"4 epochs cost clm {costs.get(AR, math.nan):+.1%} of its bits per token "
            + ("(under the 1% margin: nearly free)" if free else "(not free within 1%)"),
            f"R_D*(mdlm) = {_r_text(mdlm)} against about 500, "
            + (
                f"greater than clm's, as both papers find (at least {mdlm['low'] / clm['high']:.0f} times: its "
                "interval's lower end over clm's upper)"
                if larger
                else "not clearly greater than clm's"
            ),
        ]
        if worse is not None:
            parts.append(f"from {worse} epochs on clm ends worse than reading its unique tokens once (it overfits)")
        if paper_in and larger and free:
            kind = "Reproduced"
        else:
            kind = "Reproduced in part" if larger or paper_in or free else "Not reproduced"
        headline = (
            f"R_D* clm {_r_text(clm, short=True)} (paper 15.4), mdlm {_r_text(mdlm, short=True)} (about 500); "
            f"4 epochs cost clm {costs.get(AR, math.nan):+.1%}"
        )
        return f"{kind}: {'; '.join(parts)}.", headline

    def _plot(self, bits: dict[tuple[str, str, int], list[float]], fits: dict[str, dict | None]) -> Figure:
        figure = Figure(figsize=(11, 4.5), layout="constrained")
        axes = figure.subplots(1, 2)
        d = float(STEPS * TOKENS_PER_STEP)
        for ax, objective in zip(axes, OBJECTIVES, strict=True):
            for kind, grid, marker in (("repeated", EPOCHS, "o"), ("fresh", (1, *FRESH), "s")):
                xs, ys, errs = [], [], []
                for e in grid:
                    values = bits.get((objective, "repeated" if e == 1 else kind, e), [])
                    if values:
                        xs.append(e)
                        ys.append(statistics.fmean(values))
                        errs.append(statistics.stdev(values) if len(values) > 1 else 0.0)
                label = "D tokens over D/epochs unique" if kind == "repeated" else "D/epochs unique tokens, read once"
                ax.errorbar(xs, ys, yerr=errs, marker=marker, capsize=3, label=label)
            fit = fits.get(f"{objective}, to {LAW_REGIME} epochs")
            if fit:
                epochs = np.geomspace(1, EPOCHS[-1], 100)
                lines = ((fit["r"], "-", f"fit to {LAW_REGIME} epochs, R_D* = {fit['r']:.3g}"),
                         (PAPER_R[objective], ":", "paper's R_D*"))  # fmt: skip
                for r, style, name in lines:
                    curve = data_law(effective_data(d / epochs, epochs, r), *fit["law"])
                    ax.plot(epochs, curve, style, color="grey", label=name)
            if objective == AR:
                for arm in CONTROLS:
                    values = bits.get((arm, "repeated", EPOCHS[-1]), [])
                    if values:
                        ax.plot([EPOCHS[-1]], [statistics.fmean(values)], "x", markersize=9, label=arm)
            ax.set_xscale("log", base=2)
            ax.set_xlabel("epochs (iso-FLOP: U = D / epochs)")
            ax.set_ylabel("held-out bits per token" + bound_note(objective))
            ax.set_title(objective)
            ax.legend(fontsize=7)
        return figure


def _bits_by_cell(finished: list[FinishedRun]) -> dict[tuple[str, str, int], list[float]]:
    cells: dict[tuple[str, str, int], list[float]] = {}
    for run in sorted(finished, key=lambda r: r.planned.labels["seed"]):
        labels = run.planned.labels
        value = run.last("val_bits_per_token")
        if math.isfinite(value):
            cells.setdefault((labels["objective"], labels["kind"], labels["epochs"]), []).append(value)
    return cells


def _first_worse(bits: dict[tuple[str, str, int], list[float]]) -> int | None:
    """The fewest epochs at which clm's iso-FLOP run ends worse (in mean) than reading the same unique tokens once."""
    for epochs in FRESH:
        repeated, fresh = bits.get((AR, "repeated", epochs)), bits.get((AR, "fresh", epochs))
        if repeated and fresh and statistics.fmean(repeated) > statistics.fmean(fresh):
            return epochs
    return None


def _r_text(fit: dict | None, short: bool = False) -> str:
    """R_D* with its interval; an end of R_RANGE said as a bound (the fit went as far as it may)."""
    if fit is None:
        return "—"

    def one(value: float) -> str:
        if value >= 0.99 * R_RANGE[1]:
            return f"≥ {R_RANGE[1]:g}"
        if value <= 1.01 * R_RANGE[0]:
            return f"≤ {R_RANGE[0]:g}"
        return f"{value:.3g}"

    point = one(fit["r"])
    if short or math.isnan(fit["low"]):
        return point
    low, high = one(fit["low"]), one(fit["high"])
    return f"{point} (every resample)" if low == high == point else f"{point} [{low}, {high}]"


def _arm_keys(arm: str) -> str:
    return " ".join(f"`{k}`" for k in CONTROLS.get(arm, (f"objective={arm}",)))


def _fit_note() -> str:
    return (
        "The data law L(D) = E + B / D^beta is fitted per objective through the fresh runs (1 epoch of D, and U = "
        "D/2 to D/16 read once), R_D* through the repeated runs (2 to 64 epochs) with the law held: the paper's own "
        "two stages, at one model size (so its R_N* does not enter). Both fits are redone on every resample of the "
        f"bootstrap ({BOOTSTRAP} resamples, each cell's seeds drawn again with replacement; the interval is of "
        f"log R_D*). An R_D* at the top of the searched range ({R_RANGE[1]:g}) means the repeated runs lose nothing "
        "the fit can see: the grid cannot tell it from infinity. mdlm's figures are the diffusion bound, an upper "
        "bound on its negative log-likelihood, so its law's level is not comparable with clm's; its shape is."
    )


def _cells_note() -> str:
    return (
        "Mean over seeds with the 95% t interval. The iso-FLOP row trains every run on the same D = 409,600 tokens, "
        "as 1 to 64 passes over D/epochs unique tokens; the fresh row reads those D/epochs tokens once (the 1-epoch "
        "cell is the same run in both)."
    )


def _control_note() -> str:
    return (
        "Each arm trains D tokens over D/64 unique tokens, like the 64-epoch cell above. `objective.input_mask_prob` "
        "replaces that share of clm's inputs by [MASK] in training (the targets stay the clean next tokens; the "
        "held-out text is read clean), the input corruption of Ni et al. 2025's ablations; `model.dropout` is "
        "dropout on the residual branches."
    )
