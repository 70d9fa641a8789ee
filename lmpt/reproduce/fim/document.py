"""The fim document's sections and plot: the grid, fim's left-to-right cost by document length, the cost against the
share of positions its sentinels take, the FIM loss, Zorro beside the untrained control, every run, the headline
for the README, and the cost against the sentinel share and the document length."""

from __future__ import annotations

import math
import statistics

from matplotlib.figure import Figure

from lmpt.downstream.figures import ACCURACY, ACCURACY_GAIN, metric_key
from lmpt.objectives.yardstick import BITS_PER_TOKEN
from lmpt.report.markdown import markdown_table
from lmpt.reproduce.figures import count_text, interval, spans
from lmpt.reproduce.fim.cells import Cell, share_fit
from lmpt.reproduce.fim.findings import MARGIN
from lmpt.reproduce.fim.inputs import FimInputs
from lmpt.reproduce.fim.plan import ARMS, FIM50, ZORRO, FimGrid, cell_name, model_label
from lmpt.reproduce.reproduction import AR, FinishedRun, PlannedRun
from lmpt.reproduce.verdict import within_margin


def grid_note(grid: FimGrid, planned: list[PlannedRun], measured: dict[str, dict[int, FimInputs]]) -> str:
    corpora = ", ".join(grid.corpora)
    models = ", ".join(f"{model_label(s)} (width {s.width})" for s in grid.shapes)
    text = (
        f"{len(planned)} runs: {_many(len(grid.corpora), 'corpus', 'corpora')} ({corpora}) x "
        f"{_many(len(grid.shapes), 'model')} ({models}) x {_many(len(grid.budgets), 'budget')} "
        f"({', '.join(count_text(b) for b in grid.budgets)} tokens) x 2 objectives x {_many(grid.seeds, 'seed')}. "
        f"Windows of {grid.seq_len:,} tokens, {grid.batch_size} an optimizer step "
        f"({grid.tokens_per_step:,} tokens); each run scores Zorro's fast subset beside its untrained control "
        "when it ends."
    )
    counted = sorted({(m.steps, m.positions) for by_seed in measured.values() for m in by_seed.values()})
    if counted:
        steps, positions = counted[0]
        text += (
            f" The sentinel share is counted over the first {steps} training batches of each fim seed "
            f"({positions:,} input positions), rebuilt in process from the run's own keys and token cache: "
            "lmpt's batches are a function of the seed and the step, so they are the batches the run trained on; "
            "a document's length is measured on the training text of its token cache."
        )
    if grid.seeds < 2:
        text += (
            " With one seed there is no interval over seeds (an interval needs 2): no claim is judged from it, "
            "and each stays inconclusive."
        )
    return text


def cost_table(cells: list[Cell], lengths: dict[str, float], shares: dict[str, list[float]]) -> str:
    rows = []
    for cell in cells:
        clm, fim = cell.values(AR, BITS_PER_TOKEN), cell.values(FIM50, BITS_PER_TOKEN)
        mean, low, high = interval(cell.costs)
        share = shares.get(cell.corpus)
        rows.append(
            [
                cell.corpus,
                f"{lengths[cell.corpus]:,.0f}" if cell.corpus in lengths else "—",
                f"{statistics.fmean(share):.2%}" if share else "—",
                model_label(cell.shape),
                count_text(cell.tokens),
                str(len(cell.seeds)),
                f"{statistics.fmean(clm):.4f}",
                f"{statistics.fmean(fim):.4f}",
                spans(mean, low, high),
                str(within_margin(low, high, MARGIN).value),
            ]
        )
    header = [
        "corpus",
        "tokens a document",
        "sentinel share",
        "model",
        "training tokens",
        "seeds",
        "clm bits/token",
        "fim bits/token",
        "fim - clm, % of clm (95%)",
        f"FIM-for-free (within +-{MARGIN:g}%)",
    ]
    return _markdown(header, rows)


def share_table(
    grid: FimGrid, cells: list[Cell], measured: dict[str, dict[int, FimInputs]], lengths: dict[str, float]
) -> str:
    rows = []
    for cell in cells:
        ratios = [
            cost / (100 * measured[cell.corpus][s].sentinel_share)
            for cost, s in zip(cell.costs, cell.seeds, strict=True)
        ]
        rows.append(
            [
                model_label(cell.shape),
                count_text(cell.tokens),
                cell.corpus,
                f"{lengths[cell.corpus]:,.0f}",
                f"{statistics.fmean(100 * measured[cell.corpus][s].sentinel_share for s in cell.seeds):.3f}",
                spans(*interval(cell.costs)),
                spans(*interval(ratios)),
            ]
        )
    table = _markdown(
        [
            "model",
            "training tokens",
            "corpus",
            "tokens a document",
            "sentinel share, %",
            "cost, % of clm (95%)",
            "cost per point of share (95%)",
        ],
        rows,
    )
    fits = []
    for shape in grid.shapes:
        for tokens in grid.budgets:
            fit = share_fit([c for c in cells if (c.shape, c.tokens) == (shape, tokens)], measured)
            if fit is not None:
                (a, a_low, a_high), (k, k_low, k_high) = fit
                fits.append(
                    f"- {cell_name(shape, tokens)}: cost = a + k x share over every run, a = "
                    f"{spans(a, a_low, a_high)}% (the cost with no sentinels), k = {spans(k, k_low, k_high)} "
                    "(% of cost per % of positions)"
                )
    note = (
        "Each run's cost (fim - clm, % of clm's bits per token) against the share of its fim run's input "
        "positions that hold sentinels (measured for its seed). Where the cost is the text the sentinels take, "
        "the cost per point of share is the same on every corpus and a line through the runs passes through 0."
    )
    return "\n\n".join([table, note, "\n".join(fits) or "No fit: it needs two seeds and two corpora."])


def fim_table(cells: list[Cell]) -> str:
    rows = []
    for cell in cells:
        row = [cell.corpus, model_label(cell.shape), count_text(cell.tokens)]
        for form in ("psm", "spm"):
            clm, fim = cell.fim_loss(form)
            diff = interval([f - c for c, f in zip(clm, fim, strict=True)])
            row.append(f"{statistics.fmean(clm):.3f} / {statistics.fmean(fim):.3f} ({spans(*diff, spec='+.3f')})")
        rows.append(row)
    return _markdown(["corpus", "model", "training tokens", "PSM: clm / fim (fim - clm, 95%)", "SPM: the same"], rows)


def zorro_table(cells: list[Cell]) -> str:
    rows = []
    for cell in cells:
        acc = {arm: cell.values(arm, metric_key(ZORRO, ACCURACY)) for arm in ARMS}
        gain = {arm: cell.values(arm, metric_key(ZORRO, ACCURACY_GAIN)) for arm in ARMS}
        if any(math.isnan(v) for v in acc[AR] + acc[FIM50]):
            continue
        diff = interval([f - c for f, c in zip(acc[FIM50], acc[AR], strict=True)])
        rows.append(
            [
                cell.corpus,
                model_label(cell.shape),
                count_text(cell.tokens),
                *(f"{statistics.fmean(acc[a]):.3f} ({statistics.fmean(gain[a]):+.3f})" for a in ARMS),
                spans(*diff, spec="+.3f"),
            ]
        )
    header = ["corpus", "model", "training tokens", "clm: accuracy (gain)", "fim: the same", "fim - clm (95%)"]
    return _markdown(header, rows) if rows else "No run scored Zorro."


def every_run(finished: list[FinishedRun], measured: dict[str, dict[int, FimInputs]]) -> str:
    rows = []
    for run in finished:
        labels = run.planned.labels
        inputs = measured.get(labels["corpus"], {}).get(labels["seed"])
        share = f"{inputs.sentinel_share:.4%}" if inputs is not None and labels["objective"] == FIM50 else "—"
        rows.append(
            [
                run.planned.name,
                f"{run.last('val_bits_per_token'):.4f}",
                f"{run.last('val_fim_psm_loss') / math.log(2):.4f}",
                f"{run.last('val_fim_spm_loss') / math.log(2):.4f}",
                _figure(run.last(metric_key(ZORRO, ACCURACY)), ".3f"),
                share,
                f"{float(run.status.get('train_s', math.nan)):.1f}",
            ]
        )
    header = [
        "run",
        BITS_PER_TOKEN,
        "FIM loss PSM (bits)",
        "FIM loss SPM (bits)",
        "Zorro accuracy",
        "sentinel share (its first batches)",
        "train s",
    ]
    return _markdown(header, rows) if rows else "No run completed yet."


def headline(cells: list[Cell], lengths: dict[str, float]) -> str:
    if not cells:
        return "no runs yet"
    top = max(cells, key=lambda c: (c.shape.width, c.tokens))
    mine = sorted(
        (c for c in cells if (c.shape, c.tokens) == (top.shape, top.tokens) and c.corpus in lengths),
        key=lambda c: lengths[c.corpus],
    )
    costs = ", ".join(f"{c.corpus} {statistics.fmean(c.costs):+.2f}%" for c in mine)
    return f"fim - clm ({top.name}): {costs}"


def plot(grid: FimGrid, cells: list[Cell], measured: dict[str, dict[int, FimInputs]]) -> Figure | None:
    if not cells:
        return None
    figure = Figure(figsize=(11, 4.5), layout="constrained")
    by_share, by_length = figure.subplots(1, 2)
    for shape in grid.shapes:
        for tokens in grid.budgets:
            mine = [c for c in cells if (c.shape, c.tokens) == (shape, tokens)]
            if not mine:
                continue
            xs = [statistics.fmean(100 * measured[c.corpus][s].sentinel_share for s in c.seeds) for c in mine]
            lengths = [next(iter(measured[c.corpus].values())).mean_document for c in mine]
            figures = [interval(c.costs) for c in mine]
            ys = [m for m, _, _ in figures]
            errors = [0.0 if math.isnan(lo) else m - lo for m, lo, _ in figures]
            label = cell_name(shape, tokens)
            drawn = by_share.errorbar(xs, ys, yerr=errors, marker="o", capsize=3, linestyle="none", label=label)
            by_length.errorbar(lengths, ys, yerr=errors, marker="o", capsize=3, linestyle="none", label=label)
            fit = share_fit(mine, measured)
            if fit is not None:  # the line through the runs: cost = a + k x share
                (a, _, _), (k, _, _) = fit
                ends = [0.0, max(xs)]
                by_share.plot(ends, [a + k * x for x in ends], ls="--", lw=1, color=drawn.lines[0].get_color())
            for x, length, y, c in zip(xs, lengths, ys, mine, strict=True):
                by_share.annotate(c.corpus, (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
                by_length.annotate(c.corpus, (length, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
    for ax, xlabel in (
        (by_share, "sentinel share of fim's input positions, % (measured)"),
        (by_length, "mean document length, tokens (measured)"),
    ):
        ax.axhline(0.0, color="grey", lw=0.8)
        ax.axhspan(-MARGIN, MARGIN, color="tab:green", alpha=0.08)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("fim - clm, % of clm's bits per token (95%)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    by_share.set_xlim(left=0)
    by_length.set_xscale("log")
    figure.suptitle("FIM's left-to-right cost against the text its sentinels take", fontsize=11)
    return figure


def _many(n: int, word: str, plural: str = "") -> str:
    return f"{n} {word if n == 1 else plural or word + 's'}"


def _figure(value: float, spec: str) -> str:
    return "—" if math.isnan(value) else f"{value:{spec}}"


def _markdown(header: list[str], rows: list[list[str]]) -> str:
    return "\n".join(markdown_table(header, rows))
