"""When masked diffusion overtakes autoregression on repeated data (Prabhudesai et al. 2025, "Linear Fit of Critical
Compute"): the compute at which mdlm's frontier first falls below clm's, per count of unique tokens U, and the power
law through those crossings, beside the paper's C_crit(U) = 2.12e15 (U / 1e6)^2.174 FLOPs.

A frontier, as the paper's: at each compute, the best held-out bits per token over every model size and epoch count
trained with at most that compute. The grid: a ladder of model widths (the shape follows the width: a layer and a
head per 32 dimensions, a feed-forward of 3 widths), `epochs` passes over each U (the first U tokens of WikiText-2's
text, the same for every run), clm and mdlm, `seeds` seeds. A run is kept when its compute is at most CAP_FACTOR times
the law's C_crit(U): the grid reaches past the crossing the paper predicts, and a crossing not found inside it is said
to be beyond it. Every run is ranked by held-out bits per token on the same windows: exact for clm, the diffusion
bound for mdlm (an upper bound, so a crossing found with it is one the exact likelihood would find no later)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from lmpt.downstream.significance import seed_interval
from lmpt.errors import LmptError
from lmpt.reproduce.repetition import AR, DIFFUSION, OBJECTIVES
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

LAW = (2.12e15, 2.174)
"""C_crit(U) = a (U / 1e6)^k FLOPs (Prabhudesai et al. 2025, the project page's linear fit of critical compute)."""
UNIQUE = (10_000, 20_000, 40_000)
EPOCHS = (1, 4, 16, 64, 256)
LADDER = (16, 32, 64, 128)
"""Model widths: 0.04M, 0.08M, 0.24M (micro) and 1.1M parameters at a 2,048-piece vocabulary."""
VOCAB = 2048
SEQ_LEN = 128
LINE = (80_000, 64, (1, 4, 16, 64, 128, 256))
"""The micro model's line at 80,000 unique tokens carried on to 256 epochs (docs/data_constrained_study.md found its
mdlm still falling at 64 epochs, its trend reaching clm's best near the law's 8.7e12 FLOPs): one width, so not a
frontier, run by the default grid beside it."""
EARLIER_TREND = 9.57e12
"""Where docs/data_constrained_study.md's trend of that line (bf16, searched learning rates) met clm's best."""
CAP_FACTOR = 5.0
"""A run is in the grid when its compute is at most this times the law's C_crit(U)."""
MAX_EMBEDDING_SHARE = 0.95
"""A width whose token embedding would hold more of the model's parameters than this is refused: too small for the
tokenizer (a lookup table with a sliver of a transformer on top)."""
DATA_KEYS = ("data=wikitext", f"tokenizer.vocab_size={VOCAB}")
COMMON = ("trainer.eval_every=0", "trainer.sample_tokens=0")


def law(unique: float) -> float:
    """The paper's critical compute at `unique` tokens."""
    return LAW[0] * (unique / 1e6) ** LAW[1]


@dataclass(frozen=True)
class Shape:
    """A ladder rung: its width and the shape that follows from it."""

    width: int

    @property
    def label(self) -> str:
        """Its name in run labels and SLOT_RATE: micro at width 64 (that model's shape), else wWIDTH."""
        return "micro" if self.width == 64 else f"w{self.width}"

    @property
    def layers(self) -> int:
        return max(1, self.width // 32)

    @property
    def ffn(self) -> int:
        return 3 * self.width

    @property
    def matmul_parameters(self) -> int:
        return self.layers * (4 * self.width**2 + 3 * self.width * self.ffn)

    @property
    def parameters(self) -> int:
        """Parameters with the tied embedding (norms aside)."""
        return VOCAB * self.width + self.matmul_parameters

    @property
    def flops_per_token(self) -> float:
        """Training FLOPs a token of clm, as lmpt counts them: 6 N_mm + 12 L d S + the head's 6 d V."""
        return 6.0 * self.matmul_parameters + 12.0 * self.layers * self.width * SEQ_LEN + 6.0 * self.width * VOCAB

    def keys(self) -> tuple[str, ...]:
        heads = max(1, self.width // 32)
        return (
            "model=micro",
            f"model.d_model={self.width}",
            f"model.n_layers={self.layers}",
            f"model.n_heads={heads}",
            f"model.ffn_dim={self.ffn}",
        )


def check_ladder(widths: Sequence[int]) -> list[Shape]:
    """The ladder's shapes; a width too small for the tokenizer refused in one line."""
    shapes = []
    for width in widths:
        if width < 1:
            raise LmptError(f"ladder width {width} must be at least 1")
        shape = Shape(width)
        share = VOCAB * width / shape.parameters
        if share > MAX_EMBEDDING_SHARE:
            raise LmptError(
                f"ladder width {width} is too small for the {VOCAB:,}-piece tokenizer: its embedding would hold "
                f"{share:.1%} of its {shape.parameters:,} parameters; give widths of at least 16"
            )
        shapes.append(shape)
    return shapes


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


class Crossover(Reproduction):
    name: ClassVar[str] = "crossover"
    title: ClassVar[str] = "when diffusion overtakes autoregression: critical compute on a frontier (Prabhudesai 2025)"
    paper: ClassVar[str] = (
        'Prabhudesai, Wu, Zadeh, Fragkiadaki and Pathak (2025), "Diffusion Beats Autoregressive in Data-Constrained '
        'Settings", arXiv:2507.15857'
    )
    claim: ClassVar[str] = (
        "The project page's \"Linear Fit of Critical Compute\": on frontiers over model sizes, masked diffusion's "
        "validation loss falls below autoregression's once compute passes C_crit(U) = 2.12e15 (U / 1e6)^2.174 FLOPs, "
        "U the unique tokens: about 9.5e10, 4.3e11 and 1.9e12 FLOPs at 10k, 20k and 40k unique tokens."
    )
    papers_figures: ClassVar[str] = (
        "C_crit(U) = 2.12e15 x (U / 1e6)^2.174 FLOPs, fitted through crossings at 25M to 100M unique tokens with "
        "models of 7M to 2.5B parameters and up to 800 epochs; extrapolated here to 10k-40k unique tokens "
        "(9.5e10, 4.3e11, 1.9e12 FLOPs), 3 to 4 orders of magnitude below their smallest U. Their compute is 6 N D; "
        "lmpt's counts the output head and attention too (6 N_mm + 12 L d S + 6 d V a token), which at these widths "
        "is most of it."
    )
    cost_note: ClassVar[str] = (
        "Each U's grid keeps the (width, epochs) runs with compute at most 5 times the law's C_crit(U), for clm and "
        "mdlm, over 2 seeds, one thread a run, one per core: 180 runs, 1.4 slot-hours at this CPU's "
        "measured rates. The larger version is one key away on a machine with more cores: `lmpt-reproduce crossover "
        "seeds=3 unique_tokens=[10000,20000,40000,80000] ladder=[16,32,64,128,256] slots=32` plans 414 runs, 8.7 "
        "slot-hours: about 16 minutes on a 32-core node, 4.4 hours on 2 cores. `unique_tokens`, `epochs` and "
        "`ladder` change the grid; the dry run (`dry_run=true`) states its time before anything starts and "
        "`max_minutes` refuses a plan longer than asked. The default grid also carries the micro model's line at "
        "80,000 unique tokens on to 256 epochs (24 runs with `seeds=2`, 1.5 slot-hours: the most expensive part)."
    )
    default_seeds: ClassVar[int] = 2
    grid_keys: ClassVar[tuple[str, ...]] = ("unique_tokens", "epochs", "ladder")

    def __init__(self, seeds: int, **grid: list[str]) -> None:
        super().__init__(seeds, **grid)
        self.unique = [int(u) for u in _numbers(grid.get("unique_tokens"), "unique_tokens", UNIQUE)]
        for u in self.unique:
            if u < SEQ_LEN + 1:
                raise LmptError(
                    f"unique_tokens={u} holds no window of {SEQ_LEN + 1} tokens: give at least {SEQ_LEN + 1}"
                )
        self.epochs = _numbers(grid.get("epochs"), "epochs", EPOCHS)
        for e in self.epochs:
            if not e >= 1:
                raise LmptError(f"epochs={e:g} is below 1: every run reads its unique tokens at least once")
        self.ladder = check_ladder([int(w) for w in _numbers(grid.get("ladder"), "ladder", LADDER)])

    def runs(self) -> list[PlannedRun]:
        planned = []
        for seed in range(self.seeds):
            for unique in self.unique:
                cap = CAP_FACTOR * law(unique)
                for shape in self.ladder:
                    for epochs in self.epochs:
                        for objective in OBJECTIVES:
                            run = _planned(objective, shape, unique, epochs, seed)
                            if run.flops <= cap:
                                planned.append(run)
        if not self.grid:  # the default grid carries the 80,000-token micro line on to 256 epochs
            unique, width, line_epochs = LINE
            for seed in range(self.seeds):
                for epochs in line_epochs:
                    planned += [_planned(o, Shape(width), unique, float(epochs), seed) for o in OBJECTIVES]
        return planned

    # -- analysis ---------------------------------------------------------------------------------------------------
    def analyse(self, finished: list[FinishedRun]) -> Findings:
        points = _points(finished)
        rows, crossings = [], {}
        for unique in self.unique:
            mean_fronts = {o: frontier(_cell_means(points, unique, o)) for o in OBJECTIVES}
            found = first_crossing(mean_fronts[DIFFUSION], mean_fronts[AR])
            per_seed, gaps = [], []
            for seed in range(self.seeds):
                fronts = {o: frontier(_seed_points(points, unique, o, seed)) for o in OBJECTIVES}
                if all(fronts.values()):
                    per_seed.append(first_crossing(fronts[DIFFUSION], fronts[AR]))
                    gaps.append(final_gap(fronts[DIFFUSION], fronts[AR]))
            crossings[unique] = found
            ran = max((f for o in OBJECTIVES for f, _ in _cell_means(points, unique, o)), default=0.0)
            rows.append(
                [
                    f"{unique:,}",
                    f"{law(unique):.2e}",
                    _crossing_text(found, ran),
                    ", ".join("—" if c is None else f"{c:.2e}" for c in per_seed) or "—",
                    _log_interval([c for c in per_seed if c is not None], len(per_seed)),
                    f"{found / law(unique):.2f}" if found else "—",
                    _best_text(mean_fronts[AR]),
                    _best_text(mean_fronts[DIFFUSION]),
                    mean_cell(gaps, "+.3f"),
                ]
            )
        table = markdown_table(
            [
                "unique tokens",
                "law's C_crit",
                "lmpt's crossing (seed means)",
                "each seed's crossing",
                "95% interval (log, over seeds)",
                "lmpt / law",
                "clm's best (FLOPs)",
                "mdlm's best (FLOPs)",
                "mdlm - clm at the end [95% t, seeds]",
            ],
            rows,
        )
        fit = _power_law({u: c for u, c in crossings.items() if c})
        fit_text = (
            f"Through lmpt's crossings: C_crit(U) = {fit[0]:.3g} x (U / 1e6)^{fit[1]:.3f} FLOPs, beside the paper's "
            f"2.12e15 x (U / 1e6)^2.174."
            if fit
            else "Fewer than two counts of unique tokens crossed inside the grid: no power law can be fitted."
        )
        verdict, headline = self._verdict(crossings, fit)
        sections = [
            ("The critical compute, per count of unique tokens", "\n".join(table) + "\n\n" + fit_text),
            *_line_section(points),
            ("Every run's figure", "\n".join(_runs_table(points))),
        ]
        return Findings(verdict, headline, sections, self._plot(points, crossings, fit))

    def _verdict(self, crossings: dict[int, float | None], fit: tuple[float, float] | None) -> tuple[str, str]:
        found = {u: c for u, c in crossings.items() if c}
        if not found:
            return (
                "Not reproduced: mdlm's frontier did not fall below clm's inside the grid at any count of unique "
                f"tokens (the grid reaches {CAP_FACTOR:g} times the law's critical compute)",
                "no crossing in the grid",
            )
        ratios = ", ".join(f"{found[u] / law(u):.2f}x the law at {u:,}" for u in sorted(found))
        within = all(1 / 3 <= found[u] / law(u) <= 3 for u in found)
        kind = "Reproduced" if len(found) == len(crossings) and within else "Reproduced in part"
        exponent = f"; exponent {fit[1]:.2f} against 2.174" if fit else ""
        return (
            f"{kind}: mdlm overtakes clm at {ratios}{exponent}",
            f"crossing at {ratios}{exponent}",
        )

    def _plot(self, points: dict, crossings: dict[int, float | None], fit: tuple[float, float] | None) -> Figure:
        figure = Figure(figsize=(4 * (len(self.unique) + 1), 4.2), layout="constrained")
        axes = figure.subplots(1, len(self.unique) + 1)
        colours = dict(zip(OBJECTIVES, ("tab:blue", "tab:orange"), strict=True))
        for ax, unique in zip(axes, self.unique, strict=False):
            for objective in OBJECTIVES:
                cells = _cell_means(points, unique, objective)
                if not cells:
                    continue
                ax.scatter(*zip(*cells, strict=True), s=10, alpha=0.35, color=colours[objective])
                steps = frontier(cells)
                xs, ys = zip(*steps, strict=True)
                ax.step([*xs, max(f for f, _ in cells)], [*ys, ys[-1]], where="post", color=colours[objective],
                        label=f"{objective} frontier" + bound_note(objective))  # fmt: skip
            ax.axvline(law(unique), linestyle=":", color="grey", label="law's C_crit")
            crossing = crossings.get(unique)
            if crossing:
                best = min(b for f, b in _cell_means(points, unique, DIFFUSION) if f <= crossing)
                ax.scatter([crossing], [best], s=180, facecolors="none", edgecolors="red", linewidths=2,
                           label="crossing")  # fmt: skip
            ax.set_xscale("log")
            ax.set_xlabel("training FLOPs")
            ax.set_ylabel("held-out bits per token")
            ax.set_title(f"{unique:,} unique tokens")
            ax.legend(fontsize=7)
        ax = axes[-1]
        grid = np.geomspace(min(self.unique) / 2, max(self.unique) * 2, 50)
        ax.plot(grid, [law(u) for u in grid], ":", color="grey", label="paper's law")
        found = {u: c for u, c in crossings.items() if c}
        if found:
            ax.scatter(list(found), list(found.values()), color="red", label="lmpt's crossings")
        else:
            ax.text(0.5, 0.1, "no crossing inside the grid", transform=ax.transAxes, ha="center", color="red")
        if fit:
            ax.plot(grid, fit[0] * (grid / 1e6) ** fit[1], "-", color="red", alpha=0.5, label="fit through them")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("unique tokens")
        ax.set_ylabel("critical compute (FLOPs)")
        ax.legend(fontsize=7)
        return figure


def _planned(objective: str, shape: Shape, unique: int, epochs: float, seed: int) -> PlannedRun:
    steps = max(1, round(unique * epochs / TOKENS_PER_STEP))
    return PlannedRun(
        f"u{unique}-w{shape.width}-{epochs:g}x-{objective}-seed{seed}",
        (
            f"objective={objective}",
            *DATA_KEYS,
            *shape.keys(),
            f"data.unique_tokens={unique}",
            f"trainer.max_steps={steps}",
            f"scheduler.warmup_steps={max(1, steps // 10)}",
            f"trainer.seed={seed}",
            *COMMON,
        ),
        {
            "objective": objective,
            "model": shape.label,
            "width": shape.width,
            "unique": unique,
            "epochs": epochs,
            "seed": seed,
        },
        shape.flops_per_token * steps * TOKENS_PER_STEP,
    )


def _numbers(given: list[str] | None, key: str, default: Sequence[float]) -> list[float]:
    if not given:
        return [float(x) for x in default]
    try:
        return [float(x) for x in given]
    except ValueError:
        raise LmptError(f"{key}=[{','.join(given)}] must be a list of numbers") from None


Points = dict[tuple[int, str, int, float], dict[int, tuple[float, float]]]


def _points(finished: list[FinishedRun]) -> Points:
    """(unique, objective, width, epochs) -> seed -> (FLOPs, bits per token) of each completed run."""
    points: Points = {}
    for run in finished:
        labels = run.planned.labels
        bits, flops = run.last("val_bits_per_token"), run.last("flops")
        if math.isfinite(bits) and math.isfinite(flops):
            key = (labels["unique"], labels["objective"], labels["width"], labels["epochs"])
            points.setdefault(key, {})[labels["seed"]] = (flops, bits)
    return points


def _cell_means(points: Points, unique: int, objective: str) -> list[tuple[float, float]]:
    return [
        (statistics.fmean(f for f, _ in seeds.values()), statistics.fmean(b for _, b in seeds.values()))
        for (u, o, _, _), seeds in points.items()
        if u == unique and o == objective
    ]


def _seed_points(points: Points, unique: int, objective: str, seed: int) -> list[tuple[float, float]]:
    return [seeds[seed] for (u, o, _, _), seeds in points.items() if u == unique and o == objective and seed in seeds]


def _line_section(points: Points) -> list[tuple[str, str]]:
    """The 80,000-token micro line: each epoch count's bits per token for both arms, and where mdlm's meets clm's
    best along it (empty when none of its runs completed)."""
    unique, width, line_epochs = LINE
    cells = {(o, e): seeds for (u, o, w, e), seeds in points.items() if u == unique and w == width and e in line_epochs}
    if not cells:
        return []
    rows, means = [], {}
    for epochs in line_epochs:
        row = [f"{epochs:g}"]
        for objective in OBJECTIVES:
            seeds = cells.get((objective, float(epochs)), {})
            values = [b for _, b in seeds.values()]
            if values:
                means[objective, epochs] = (statistics.fmean(f for f, _ in seeds.values()), statistics.fmean(values))
            row.append(mean_cell(values))
        flops = means.get((AR, epochs), means.get((DIFFUSION, epochs), (math.nan, 0.0)))[0]
        rows.append([*row[:1], f"{flops:.2e}", *row[1:]])
    table = markdown_table(["epochs", "clm FLOPs", f"{AR} bits per token", f"{DIFFUSION}{bound_note(DIFFUSION)}"], rows)
    ar = [(f, b, e) for (o, e), (f, b) in means.items() if o == AR]
    dm = [(f, b, e) for (o, e), (f, b) in means.items() if o == DIFFUSION]
    if not ar or not dm:
        return [("The micro line at 80,000 unique tokens, on to 256 epochs", "\n".join(table))]
    best = min(ar, key=lambda x: x[1])
    below = sorted((f, b, e) for f, b, e in dm if b < best[1])
    lowest = min(dm, key=lambda x: x[1])
    if below:
        words = (
            f"mdlm's bound first falls below clm's best on this line ({best[1]:.3f} at {best[2]:g} epochs) at "
            f"{below[0][2]:g} epochs, {below[0][0]:.2e} FLOPs: {below[0][0] / law(unique):.2f} times the law's "
            f"{law(unique):.2e} and {below[0][0] / EARLIER_TREND:.2f} times where the earlier study's trend put it."
        )
    else:
        words = (
            f"mdlm's bound stays above clm's best on this line ({best[1]:.3f} at {best[2]:g} epochs) up to "
            f"{max(e for _, _, e in dm):g} epochs: its lowest is {lowest[1]:.3f} at {lowest[2]:g} epochs "
            f"({lowest[0]:.2e} FLOPs), {lowest[1] - best[1]:+.3f} bits from it; the law puts the crossing at "
            f"{law(unique):.2e} FLOPs and the earlier study's trend at {EARLIER_TREND:.2e}."
        )
    note = (
        "One model (micro, width 64), so a line, not a frontier: the line docs/data_constrained_study.md left "
        "at 64 epochs, here in fp32 at lmpt's default learning rates (that study used bf16 and searched them). "
        "Mean over seeds with the 95% t interval."
    )
    return [("The micro line at 80,000 unique tokens, on to 256 epochs", "\n".join([note, "", *table, "", words]))]


def _crossing_text(found: float | None, ran: float) -> str:
    return f"{found:.2e}" if found else f"none up to {ran:.2e}"


def _best_text(front: list[tuple[float, float]]) -> str:
    if not front:
        return "—"
    flops, bits = front[-1]
    return f"{bits:.3f} ({flops:.2e})"


def _log_interval(values: list[float], seeds: int) -> str:
    if len(values) < seeds or len(values) < 2:
        return "—" if len(values) == seeds else f"{seeds - len(values)} seed(s) did not cross"
    span = seed_interval([math.log(v) for v in values])
    assert span is not None
    return f"[{math.exp(span[0]):.2e}, {math.exp(span[1]):.2e}]"


def _power_law(crossings: dict[int, float]) -> tuple[float, float] | None:
    """(a, k) of C = a (U / 1e6)^k through the crossings (least squares in logs); None with fewer than two."""
    if len(crossings) < 2:
        return None
    x = np.log(np.array(list(crossings)) / 1e6)
    y = np.log(np.array(list(crossings.values())))
    k, log_a = np.polyfit(x, y, 1)
    return float(math.exp(log_a)), float(k)


def _runs_table(points: Points) -> list[str]:
    rows = []
    for (unique, objective, width, epochs), seeds in sorted(points.items()):
        flops = statistics.fmean(f for f, _ in seeds.values())
        bits = " / ".join(f"{seeds[s][1]:.3f}" for s in sorted(seeds))
        rows.append([f"{unique:,}", objective, str(width), f"{epochs:g}", f"{flops:.2e}", bits])
    return markdown_table(["unique tokens", "objective", "width", "epochs", "FLOPs", "bits per token by seed"], rows)
