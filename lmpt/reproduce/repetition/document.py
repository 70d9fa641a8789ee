"""The repetition document's sections and plot: the fit (R_D* and R_N* with their intervals, beside the paper's), the
runs left out of it and why, every run by seed, the headline for the README, and held-out loss against epochs with
the fitted law."""

from __future__ import annotations

import math
import statistics

import numpy as np
from matplotlib.figure import Figure

from lmpt.report.markdown import markdown_table
from lmpt.reproduce.data_constrained_law import HUBER_DELTA, PAPER_DATA_ONLY_R_D_STAR, PAPER_LAW, R_STAR_BOUNDS, Decay
from lmpt.reproduce.figures import bound_note
from lmpt.reproduce.repetition.findings import DIFFUSION_R_D_STAR
from lmpt.reproduce.repetition.fit import BOOTSTRAP, Fitted, held_out_nats, star_figure
from lmpt.reproduce.repetition.plan import OBJECTIVES, RepetitionGrid
from lmpt.reproduce.reproduction import AR, DIFFUSION, FinishedRun


def fit_section(fits: dict[str, Fitted]) -> str:
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
                    star_figure(fitted, "r_d_star", decay),
                    paper_d,
                    star_figure(fitted, "r_n_star", decay) if decay is Decay.both else "— (not decayed)",
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


def left_out_section(fits: dict[str, Fitted]) -> str:
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


def every_run_section(finished: list[FinishedRun], fits: dict[str, Fitted]) -> str:
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
        nats = held_out_nats(run)
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


def headline(fits: dict[str, Fitted], free: str) -> str:
    parts = [
        f"R_D* clm {star_figure(fits[AR], 'r_d_star')} (paper 15.39), R_N* {star_figure(fits[AR], 'r_n_star')} (5.31)",
        f"mdlm R_D* {star_figure(fits[DIFFUSION], 'r_d_star')}",
    ]
    return "; ".join(parts + ([free] if free else []))


def plot(grid: RepetitionGrid, finished: list[FinishedRun], fits: dict[str, Fitted]) -> Figure:
    """Held-out loss against epochs, a panel per objective and U: each rung's runs in the fit (seed means, their
    spread), those left out (x), and the law fitted with both decays (lines)."""
    figure = Figure(figsize=(5 * len(grid.unique), 4.2 * len(OBJECTIVES)), layout="constrained")
    axes = figure.subplots(len(OBJECTIVES), len(grid.unique), squeeze=False)
    kept = {p.name for fitted in fits.values() for p in fitted.kept}
    for row, objective in enumerate(OBJECTIVES):
        for col, unique in enumerate(grid.unique):
            ax = axes[row][col]
            for i, shape in enumerate(grid.ladder):
                cells: dict[float, list[float]] = {}
                for run in finished:
                    labels = run.planned.labels
                    if (labels["objective"], labels["width"], labels["unique"]) != (objective, shape.width, unique):
                        continue
                    epochs = labels["tokens"] / labels["seen"]
                    if run.planned.name in kept:
                        cells.setdefault(epochs, []).append(held_out_nats(run))
                    elif math.isfinite(held_out_nats(run)):
                        ax.plot([epochs], [held_out_nats(run)], "x", color=f"C{i}")
                xs = sorted(cells)
                ys = [statistics.fmean(cells[x]) for x in xs]
                spread = [statistics.stdev(cells[x]) if len(cells[x]) > 1 else 0.0 for x in xs]
                ax.errorbar(xs, ys, yerr=spread, fmt="o", color=f"C{i}", capsize=3, label=f"w{shape.width}")
                law = fits[objective].both
                if law is not None:
                    passes = np.geomspace(1, max(grid.epochs), 60)
                    ax.plot(passes, law.predict(shape.parameters, passes * unique, unique), "-", color=f"C{i}")
            ax.set_xscale("log", base=2)
            ax.set_xlabel(f"epochs over U = {unique:,} tokens")
            ax.set_ylabel(f"{objective} held-out nats a token" + bound_note(objective))
            ax.set_title(f"{objective}, U = {unique:,}: runs (dots; x left out) and the fitted law", fontsize=9)
            ax.legend(fontsize=7)
    return figure
