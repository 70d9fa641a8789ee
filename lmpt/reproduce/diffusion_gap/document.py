"""The diffusion-gap document's sections and plot: the paper's figures, the grid, the gap per size and budget, whether
it narrows, the compute multiplier, each objective's learning-rate sweep, every run, and the curves with the
relative gap beside the paper's."""

from __future__ import annotations

import math
import statistics

from matplotlib.figure import Figure

from lmpt.config.schema import MuonConfig
from lmpt.report.markdown import markdown_table
from lmpt.reproduce.diffusion_gap.findings import NIE_MULTIPLIER, sweep_edges
from lmpt.reproduce.diffusion_gap.gap import (
    PAPER_PERPLEXITY,
    Cell,
    Pairs,
    multipliers,
    paired,
    paper_gap,
    paper_slope,
    relative_gap,
)
from lmpt.reproduce.diffusion_gap.plan import LR_SWEEP, OBJECTIVES, SEQ_LEN, GapGrid
from lmpt.reproduce.figures import count_text, interval, mean_cell
from lmpt.reproduce.ladder import Shape, training_flops
from lmpt.reproduce.reproduction import AR, DIFFUSION, FinishedRun


def papers_figures() -> str:
    """The paper's figures (Sahoo et al.'s Table 1 and Nie et al.'s multiplier), for the document."""
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


def gap_section(rows: list[list[str]]) -> str:
    """The gap per size and budget: `rows` of `gap_row`, under its note."""
    return _GAP_NOTE + "\n\n" + "\n".join(markdown_table(_GAP_HEADER, rows))


def slope_section(rows: list[list[str]]) -> str:
    """Whether the gap narrows: a row per size (its seeds' slopes, their mean, the paper's, the verdict)."""
    return _SLOPE_NOTE + "\n\n" + "\n".join(markdown_table(_SLOPE_HEADER, rows))


def multiplier_section(grid: GapGrid, rows: list[list[str]]) -> str:
    """The compute multiplier: `rows` of `multiplier_row`, under its note."""
    return multiplier_note(grid) + "\n\n" + "\n".join(markdown_table(_MULTIPLIER_HEADER, rows))


def grid_text(grid: GapGrid) -> str:
    rows = [
        [
            s.label,
            str(s.width),
            str(s.layers),
            f"{s.parameters:,}",
            f"{s.matmul_parameters:,}",
            f"{training_flops(s, AR):.3g} / {training_flops(s, DIFFUSION):.3g}",
        ]
        for s in grid.ladder
    ]
    header = ["size", "width", "layers", "parameters", "non-embedding", "FLOPs a token (clm / mdlm)"]
    budgets = ", ".join(f"{count_text(t)} ({s:,} steps)" for t, s in zip(grid.tokens, grid.steps, strict=True))
    return "\n".join(
        [
            f"corpus={grid.corpus} (`{' '.join(grid.data_keys)}`), a {grid.recipe.vocab:,}-piece tokenizer, "
            f"{SEQ_LEN}-token windows, {grid.recipe.batch} a step; budgets {budgets}; {grid.seeds} seed(s); every "
            f"run draws from the first {grid.unique_tokens:,} tokens of the text. Recipe: {grid.recipe.words}.",
            "",
            *markdown_table(header, rows),
        ]
    )


def gap_row(shape: Shape, tokens: int, pairs: Pairs) -> list[str]:
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


def multiplier_row(grid: GapGrid, label: str, tokens: int, cells: dict[int, Pairs]) -> list[str]:
    found, _, figure = multipliers(grid, cells, tokens)
    each = ", ".join("beyond" if m is None else f"{m:.2f}x" for m in found) or "—"
    return [label, count_text(tokens), each, figure]


def multiplier_note(grid: GapGrid) -> str:
    return (
        "How many times clm's tokens mdlm needs to reach clm's held-out figure at a budget: along each seed's "
        "mdlm curve from that budget on, interpolated linearly in log tokens (at one model size the ratio of 6ND "
        "compute; lmpt's count gives mdlm a little less, its head running on masked tokens alone). The grid "
        f"reaches {grid.tokens[-1] / grid.tokens[0]:g}x from its smallest budget; 'beyond' when mdlm's bound "
        "never gets there."
    )


def sweep_section(grid: GapGrid, best: dict[tuple[str, int, str], Cell]) -> list[tuple[str, str]]:
    if not grid.recipe.sweep:
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
        + (", ".join(sweep_edges(best)) or "none")
        + "."
    )
    return [("Each objective's learning rate", note + "\n\n" + "\n".join(markdown_table(header, rows)))]


def plot(grid: GapGrid, best: dict[tuple[str, int, str], Cell]) -> Figure:
    figure = Figure(figsize=(11, 4.4), layout="constrained")
    left, right = figure.subplots(1, 2)
    for i, shape in enumerate(grid.ladder):
        for objective, style in zip(OBJECTIVES, ("-", "--"), strict=True):
            cells = [(t, best[shape.label, t, objective].figures) for t in grid.tokens]
            points = [(t, statistics.fmean(figures.values())) for t, figures in cells if figures]
            name = f"{shape.label} {objective}" + (" (bound)" if objective == DIFFUSION else "")
            if points:
                left.plot(*zip(*points, strict=True), style, marker="o", color=f"C{i}", label=name)
        xs, ys, errs = [], [], []
        for tokens in grid.tokens:
            pairs = paired(best[shape.label, tokens, AR].figures, best[shape.label, tokens, DIFFUSION].figures)
            if pairs:
                mean, _, high = interval([100 * relative_gap(*p) for p in pairs.values()])
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


def every_run(finished: list[FinishedRun]) -> str:
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
