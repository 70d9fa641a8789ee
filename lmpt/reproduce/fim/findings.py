"""What the fim grid finds, judged by lmpt.reproduce.verdict: FIM-for-free on each corpus (fim's paired cost within
+-MARGIN% of clm's left-to-right bits per token in every cell), the FIM loss far lower, and, over two corpora or
more, whether the cost falls as documents lengthen and whether it is the text the sentinels take (proportional to
their share, none without them); with the conditions FIM-for-free depends on, the paper's value beside the grid's."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence

from lmpt.prepare.step import composed_run
from lmpt.reproduce.figures import count_text, interval, missing_text, spans
from lmpt.reproduce.fim.cells import Cell, share_fit, welch
from lmpt.reproduce.fim.inputs import FimInputs
from lmpt.reproduce.fim.plan import FIM_RATE, PAPER_CONTEXT, SPM_RATE, FimGrid, cell_name
from lmpt.reproduce.reproduction import PlannedRun
from lmpt.reproduce.verdict import ClaimVerdict, Condition, Evidence, below, combined, judge, within_margin

MARGIN = 1.0
""""For free" in percent of clm's left-to-right bits per token: the 95% interval of fim's paired difference inside
+-1% of clm's figure."""
LONG_DOCUMENTS = 1000.0
"""Mean tokens a document from which a corpus's documents are the paper's kind: code files and web pages of thousands
of tokens."""
PAPER_SMALLEST = 50e6
PAPER_LARGEST = 6.9e9
PAPER_TOKENS = 100e9
PAPER_VOCAB = "about 50k BPE pieces (GPT-3's, with Codex's whitespace tokens for code)"
"""The paper's conditions: model sizes (non-embedding parameters), training tokens a model, vocabulary."""


def free_claim(
    grid: FimGrid,
    corpus: str,
    cells: list[Cell],
    length: float | None,
    missing: list[PlannedRun],
    conditions: list[Condition],
) -> ClaimVerdict:
    """FIM-for-free on one corpus: every cell's paired cost within +-MARGIN% of clm's bits per token."""
    claim = f"FIM-for-free on {corpus}" + (f" (documents of {length:,.0f} tokens)" if length else "")
    gone = [r for r in missing if r.labels["corpus"] == corpus]
    if len(cells) < len(grid.shapes) * len(grid.budgets):
        return judge(claim, Evidence.missing, "", conditions, missing_text([r.name for r in gone]))
    figures = [(cell, *interval(cell.costs)) for cell in cells]
    evidence = combined([within_margin(low, high, MARGIN) for _, _, low, high in figures])
    figure = "fim - clm in % of clm's bits per token: " + "; ".join(
        f"{cell.name} {spans(mean, low, high)}" for cell, mean, low, high in figures
    )
    if evidence is Evidence.shows:
        why = f"every cell's 95% interval inside +-{MARGIN:g}%"
    elif evidence is Evidence.contradicts:
        why = f"a cell's 95% interval lies wholly outside +-{MARGIN:g}%: fim costs more"
    elif any(math.isnan(low) for _, _, low, _ in figures):
        why = "one seed: no interval"
    else:
        why = f"an interval reaches past +-{MARGIN:g}%"
    return judge(claim, evidence, figure, conditions, why + _also_missing(gone))


def fim_loss_claim(
    grid: FimGrid, cells: list[Cell], missing: list[PlannedRun], conditions: list[Condition]
) -> ClaimVerdict:
    """The FIM loss far lower: fim's paired difference below 0 in every cell and both forms."""
    claim = "FIM loss far lower (PSM and SPM)"
    if len(cells) < len(grid.corpora) * len(grid.shapes) * len(grid.budgets):
        return judge(claim, Evidence.missing, "", conditions, missing_text([r.name for r in missing]))
    diffs = [
        interval([f - c for c, f in zip(*cell.fim_loss(form), strict=True)])
        for cell in cells
        for form in ("psm", "spm")
    ]
    evidence = combined([below(low, high, 0.0) for _, low, high in diffs])
    means = [mean for mean, _, _ in diffs]
    figure = (
        f"fim - clm from {min(means):+.3f} to {max(means):+.3f} bits per middle token over {len(diffs)} cells and forms"
    )
    why = {
        Evidence.shows: "every 95% interval below 0",
        Evidence.contradicts: "an interval lies wholly above 0",
    }.get(evidence, "one seed: no interval" if grid.seeds < 2 else "an interval reaches 0")
    return judge(claim, evidence, figure, conditions, why + _also_missing(missing))


def falls_claim(grid: FimGrid, cells: list[Cell], lengths: dict[str, float], missing: list[PlannedRun]) -> ClaimVerdict:
    """The cost falls as documents lengthen: the longest documents' cost below the shortest's in every model and
    budget (Welch's 95% interval of the difference)."""
    claim = "fim's cost falls as documents lengthen"
    if len(lengths) < len(grid.corpora) or len(cells) < len(grid.corpora) * len(grid.shapes) * len(grid.budgets):
        return judge(claim, Evidence.missing, "", [], missing_text([r.name for r in missing]))
    shortest, longest = min(lengths, key=lengths.__getitem__), max(lengths, key=lengths.__getitem__)
    claim += f" ({shortest}'s {lengths[shortest]:,.0f} tokens to {longest}'s {lengths[longest]:,.0f})"
    parts, evidence = [], []
    for shape in grid.shapes:
        for tokens in grid.budgets:
            short, long = (
                next(c for c in cells if (c.corpus, c.shape, c.tokens) == (name, shape, tokens)).costs
                for name in (shortest, longest)
            )
            low, high = welch(long, short)
            evidence.append(below(low, high, 0.0))
            diff = statistics.fmean(long) - statistics.fmean(short)
            parts.append(f"{cell_name(shape, tokens)} {spans(diff, low, high)}")
    verdict = combined(evidence)
    why = {
        Evidence.shows: "every interval of the difference below 0",
        Evidence.contradicts: "an interval lies wholly above 0: the cost grows",
    }.get(verdict, "one seed: no interval" if grid.seeds < 2 else "an interval reaches 0")
    figure = f"{longest}'s cost - {shortest}'s, in points of %: " + "; ".join(parts)
    return judge(claim, verdict, figure, [], why)


def proportional_claim(
    grid: FimGrid, cells: list[Cell], measured: dict[str, dict[int, FimInputs]], missing: list[PlannedRun]
) -> ClaimVerdict:
    """The cost is the text the sentinels take: in every model and budget, the cost per run against its measured
    sentinel share has a positive slope and an intercept (the cost with no sentinels) whose interval holds 0."""
    claim = "the cost comes from lost text (proportional to the sentinel share)"
    if len(cells) < len(grid.corpora) * len(grid.shapes) * len(grid.budgets):
        return judge(claim, Evidence.missing, "", [], missing_text([r.name for r in missing]))
    parts, evidence = [], []
    for shape in grid.shapes:
        for tokens in grid.budgets:
            fit = share_fit([c for c in cells if (c.shape, c.tokens) == (shape, tokens)], measured)
            if fit is None:
                evidence.append(Evidence.undecided)
                parts.append(f"{cell_name(shape, tokens)}: no interval (one seed, or one share)")
                continue
            (a, a_low, a_high), (k, k_low, k_high) = fit
            if a_low > 0 or a_high < 0 or k_high < 0:
                evidence.append(Evidence.contradicts)
            elif k_low > 0:
                evidence.append(Evidence.shows)
            else:
                evidence.append(Evidence.undecided)
            parts.append(f"{cell_name(shape, tokens)}: k {spans(k, k_low, k_high)}, a {spans(a, a_low, a_high)}%")
    verdict = combined(evidence)
    why = {
        Evidence.shows: "the cost rises with the share and its intercept's interval holds 0",
        Evidence.contradicts: "fim costs with no sentinels (the intercept excludes 0), or less with more",
    }.get(verdict, "no interval (one seed)" if grid.seeds < 2 else "the fit cannot tell a slope from none")
    return judge(claim, verdict, "cost = a + k x sentinel share, both in %: " + "; ".join(parts), [], why)


def conditions(
    grid: FimGrid,
    lengths: dict[str, float],
    shares: dict[str, list[float]],
    corpus_tokens: dict[str, int],
    planned: list[PlannedRun],
) -> list[Condition]:
    """The conditions FIM-for-free depends on, the paper's value beside this grid's (computed from the grid and
    the text's measurements)."""
    non = [s.matmul_parameters for s in grid.shapes]
    whole = [s.parameters for s in grid.shapes]
    per_non = [t / n for t in grid.budgets for n in non]
    per_whole = [t / n for t in grid.budgets for n in whole]
    fewest = PAPER_TOKENS / PAPER_LARGEST
    rows = [
        Condition(
            "non-embedding parameters",
            f"{count_text(PAPER_SMALLEST)} to {count_text(PAPER_LARGEST)}",
            _range(non, count_text),
            min(non) >= PAPER_SMALLEST,
            "the claim is for every size from the paper's smallest up",
        ),
        Condition("parameters with the tied embedding", "not counted by the paper", _range(whole, count_text)),
        Condition("training tokens", f"{count_text(PAPER_TOKENS)} a model", _range(grid.budgets, count_text)),
        Condition(
            "tokens per non-embedding parameter",
            f"{fewest:.0f} to {PAPER_TOKENS / PAPER_SMALLEST:,.0f}",
            _range(per_non, lambda v: f"{v:,.1f}"),
            min(per_non) >= fewest,
            "the models trained as far as the paper's, for their size",
        ),
        Condition(
            "tokens per parameter against compute-optimal",
            "about 20 with the embedding (Hoffmann et al. 2022); the paper's are past it",
            _range([v / 20 for v in per_whole], lambda v: f"{v:.2g}x"),
        ),
    ]
    for corpus in grid.corpora:
        length, share, held = lengths.get(corpus), shares.get(corpus, []), corpus_tokens.get(corpus)
        rows += [
            Condition(
                f"document length: {corpus}",
                "thousands of tokens (code files, web pages)",
                f"{length:,.0f} tokens a document (measured)" if length else "not measured: no fim run completed",
                None if length is None else length >= LONG_DOCUMENTS,
                f"the paper's kind from {LONG_DOCUMENTS:,.0f} tokens on",
            ),
            Condition(
                f"sentinel share: {corpus}",
                f"at most {1.5 / PAPER_CONTEXT:.2%} (3 sentinels in half the documents, a document a context)",
                f"{statistics.fmean(share):.2%} of fim's input positions (measured)" if share else "not measured",
            ),
            Condition(
                f"passes over the text: {corpus}",
                "about one",
                _range([t / held for t in grid.budgets], lambda v: f"{v:.2f}") if held else "not measured",
            ),
        ]
    cfg = composed_run(planned[0].keys) if planned else None
    recipe = (
        f"{cfg.optimizer.name}, {cfg.scheduler.name} schedule, dropout {cfg.model.dropout:g}, weight decay "
        f"{cfg.optimizer.get('weight_decay', 0.0):g}"
        if cfg is not None
        else "—"
    )
    rows += [
        Condition(
            "context length",
            f"{PAPER_CONTEXT:,}",
            f"{grid.seq_len:,}",
            grid.seq_len >= PAPER_CONTEXT,
            "a context holds a long document whole or nearly",
        ),
        Condition(
            "what is rearranged",
            "each whole document, before it is cut into contexts",
            f"each document's piece in a window of {grid.seq_len:,}: a longer document is rearranged window by window",
        ),
        Condition("vocabulary", PAPER_VOCAB, f"{grid.vocab:,} SentencePiece pieces trained on each corpus"),
        Condition(
            "fim_rate / spm_rate",
            "0.5, PSM and SPM (FIM-50%)",
            f"{FIM_RATE:g} / {SPM_RATE:g} (clm: fim_rate 0)",
            FIM_RATE == 0.5,
        ),
        Condition("optimizer, schedule, regularisation", "Adam, its recipe per size", recipe),
        Condition(
            "what the loss is measured on",
            "left-to-right test loss of plain held-out documents; FIM loss of rearranged ones",
            f"bits per token of {grid.eval_batches * grid.batch_size} plain held-out windows of {grid.seq_len:,} "
            "tokens, the same in both arms; FIM loss on the middles of those windows rearranged at fixed split "
            "points (PSM, SPM)",
        ),
    ]
    return rows


def _range(values: Sequence[float], show: Callable[[float], str]) -> str:
    low, high = min(values), max(values)
    return show(low) if low == high else f"{show(low)} to {show(high)}"


def _also_missing(runs: list[PlannedRun]) -> str:
    return f"; {len(runs)} planned run(s) not completed" if runs else ""
