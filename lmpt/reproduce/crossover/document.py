"""The crossover document's sections and plot: the critical compute per count of unique tokens beside the law, the
grid's compute-optimal sizes per budget, the two counts of compute, every run by seed, the headline for the README,
and the frontiers with the crossings beside the law's line."""

from __future__ import annotations

import math
import statistics

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from lmpt.downstream.significance import seed_interval
from lmpt.report.markdown import markdown_table
from lmpt.reproduce.crossover.findings import crossings_text
from lmpt.reproduce.crossover.frontier import LAW, AtUnique, frontier, law, log_interval, power_law, too_wide
from lmpt.reproduce.crossover.plan import CAP_FACTOR, NEIGHBOURS, OBJECTIVES, CrossoverGrid
from lmpt.reproduce.figures import bound_note, count_text, mean_cell
from lmpt.reproduce.ladder import optimal_parameters
from lmpt.reproduce.reproduction import AR, DIFFUSION, PlannedRun


def crossings_section(found: list[AtUnique]) -> str:
    rows = []
    for at in found:
        crossings = at.seed_crossings()
        crossed = [c for c in crossings if c is not None]
        span = log_interval(crossed) if len(crossed) == len(crossings) else None
        mean, lmpt_count = at.crossing(), at.crossing("lmpt")
        interval = "—" if span is None else f"[{span[0]:.2e}, {span[1]:.2e}]"
        if span is not None and too_wide(crossed, span, geometric=True):
            interval += " (2 seeds, 1 degree of freedom: wider than the value, no verdict's basis)"
        rows.append(
            [
                f"{at.unique:,}",
                f"{at.law:.2e}",
                f"{mean:.2e}" if mean else f"none up to {at.reach * at.law:.2e}",
                crossings_text(crossings),
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
    fit = power_law({at.unique: c for at in found if (c := at.crossing())})
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


def grid_section(grid: CrossoverGrid, planned: list[PlannedRun]) -> str:
    rows = []
    for unique in grid.unique:
        for epochs in grid.epochs:
            runs = [
                r
                for r in planned
                if r.labels["unique"] == unique and r.labels["epochs"] == epochs and r.labels["seed"] == 0
            ]
            tokens = unique * epochs
            models = sorted({(r.labels["width"], r.labels["parameters"], r.paper_flops) for r in runs})
            trained = ", ".join(f"width {w} ({count_text(n)}, {tokens / n:.2g} tokens/parameter)" for w, n, _ in models)
            reach = ", ".join(f"{f / law(unique):.2g}" for *_, f in models)
            rows.append(
                [
                    f"{unique:,}",
                    f"{epochs:g}",
                    count_text(tokens),
                    count_text(optimal_parameters(tokens)),
                    trained or f"none under {CAP_FACTOR:g}x C_crit",
                    reach or "—",
                ]
            )
    table = markdown_table(
        ["unique tokens", "epochs", "D", "compute-optimal N (D / 20)", "models trained", "6ND / C_crit(U)"], rows
    )
    setting = grid.setting
    note = (
        f"Every budget trains the ladder's model nearest D / 20 parameters and {NEIGHBOURS} either side, each "
        f"objective at seeds 0 to {grid.seeds - 1}; runs above {CAP_FACTOR:g}x C_crit(U) are not planned. The "
        f"shape follows the width (a layer and a head per 32 dimensions, a feed-forward of 3 widths); "
        f"{setting.tokens_per_step:,} tokens a step ({setting.batch * setting.accum} x {setting.seq_len}), so D is "
        "rounded to whole steps. Text: the first U tokens of the corpus's training text, the same for every run."
    )
    return "\n".join([note, "", *table])


def flops_section(planned: list[PlannedRun]) -> str:
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


def runs_section(found: list[AtUnique]) -> str:
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


def headline(found: list[AtUnique]) -> str:
    if any(at.missing for at in found):
        return f"{sum(len(at.missing) for at in found)} runs missing"
    crossed = {at.unique: c for at in found if (c := at.crossing())}
    if not crossed:
        return "no crossing up to " + ", ".join(f"{at.reach:.2g}x" for at in found) + " C_crit (6ND)"
    return "crossing at " + ", ".join(f"{c / law(u):.2g}x C_crit at U = {count_text(u)}" for u, c in crossed.items())


def plot(grid: CrossoverGrid, found: list[AtUnique]) -> Figure:
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
            ax.scatter([crossing], [best], s=180, facecolors="none", edgecolors="red", linewidths=2, label="crossing")
        ax.set_xscale("log")
        ax.set_xlabel("training FLOPs (6ND)")
        ax.set_ylabel("held-out bits per token")
        ax.set_title(f"{at.unique:,} unique tokens")
        ax.legend(fontsize=7)
    ax = axes[-1]
    points = np.geomspace(min(grid.unique) / 2, max(grid.unique) * 2, 50)
    ax.plot(points, [law(u) for u in points], ":", color="grey", label="paper's law")
    crossings = {at.unique: c for at in found if (c := at.crossing())}
    if crossings:
        ax.scatter(list(crossings), list(crossings.values()), color="red", label="lmpt's crossings")
    else:
        ax.text(0.5, 0.1, "no crossing inside the grid", transform=ax.transAxes, ha="center", color="red")
    fit = power_law(crossings)
    if fit:
        ax.plot(points, fit[0] * (points / 1e6) ** fit[1], "-", color="red", alpha=0.5, label="fit through them")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("unique tokens")
    ax.set_ylabel("critical compute (6ND FLOPs)")
    ax.legend(fontsize=7)
    return figure


def _best_text(front: list[tuple[float, float]]) -> str:
    if not front:
        return "—"
    flops, bits = front[-1]
    return f"{bits:.3f} ({flops:.2e})"


def _seed_cell(values: list[float], spec: str) -> str:
    """mean_cell, with the note where two seeds' interval is wider than the mean."""
    span = seed_interval(values)
    if span is not None and too_wide(values, span):
        mean = statistics.fmean(values)
        return f"{mean:{spec}} (2 seeds: [{span[0]:{spec}}, {span[1]:{spec}}], wider than the value)"
    return mean_cell(values, spec)
