"""A fim cell: one (corpus, model, budget) with its clm and fim runs paired by seed, and the statistics over them. clm
is fim at fim_rate 0, which makes clm's batches bit for bit (tests/objectives/test_measure.py), so both runs log the
same yardsticks on the same held-out windows: the left-to-right bits per token (val_bits_per_token) and the FIM loss
(val_fim_psm_loss, val_fim_spm_loss: every held-out document rearranged at the same split points in every run, the
loss on the middle). The seed fixes a run's initial weights and its windows, so clm and fim of one seed differ in the
objective alone: the differences are paired by seed."""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy import stats

from lmpt.objectives.yardstick import BITS_PER_TOKEN
from lmpt.reproduce.fim.inputs import FimInputs
from lmpt.reproduce.fim.plan import FIM50, FimGrid, cell_name
from lmpt.reproduce.ladder import Shape
from lmpt.reproduce.reproduction import AR, FinishedRun


@dataclass(frozen=True)
class Cell:
    """One (corpus, model, budget) cell: its runs paired by seed."""

    corpus: str
    shape: Shape
    tokens: int
    clm: dict[int, FinishedRun]
    fim: dict[int, FinishedRun]

    @property
    def seeds(self) -> list[int]:
        return sorted(set(self.clm) & set(self.fim))

    def values(self, arm: str, key: str) -> list[float]:
        runs = self.clm if arm == AR else self.fim
        return [runs[s].last(key) for s in self.seeds]

    @property
    def costs(self) -> list[float]:
        """fim's left-to-right cost per seed, in percent of clm's bits per token."""
        return [
            100 * (f - c) / c
            for c, f in zip(self.values(AR, BITS_PER_TOKEN), self.values(FIM50, BITS_PER_TOKEN), strict=True)
        ]

    def fim_loss(self, form: str) -> tuple[list[float], list[float]]:
        """The FIM loss (bits per middle token) of clm and of fim per seed, `form` psm or spm."""
        key = f"val_fim_{form}_loss"
        return [v / math.log(2) for v in self.values(AR, key)], [v / math.log(2) for v in self.values(FIM50, key)]

    @property
    def name(self) -> str:
        return cell_name(self.shape, self.tokens)


def paired_cells(grid: FimGrid, finished: list[FinishedRun]) -> list[Cell]:
    """Every (corpus, model, budget) with at least one seed whose two arms both completed."""
    by: dict[tuple[str, int, int, str], dict[int, FinishedRun]] = {}
    for r in finished:
        labels = r.planned.labels
        key = (labels["corpus"], labels["width"], labels["tokens"], labels["objective"])
        by.setdefault(key, {})[labels["seed"]] = r
    cells = []
    for corpus in grid.corpora:
        for shape in grid.shapes:
            for tokens in grid.budgets:
                cell = Cell(
                    corpus,
                    shape,
                    tokens,
                    by.get((corpus, shape.width, tokens, AR), {}),
                    by.get((corpus, shape.width, tokens, FIM50), {}),
                )
                if cell.seeds:
                    cells.append(cell)
    return cells


def share_fit(
    cells: list[Cell], measured: dict[str, dict[int, FimInputs]]
) -> tuple[tuple[float, float, float], tuple[float, float, float]] | None:
    """(intercept, low, high), (slope, low, high): the least-squares line through every run's (sentinel share in %,
    cost in %) of one model and budget, with 95% t intervals; None with a cell of fewer than 2 seeds or fewer than 2
    shares."""
    if len(cells) < 2 or any(len(c.seeds) < 2 for c in cells):
        return None
    xs = [100 * measured[c.corpus][s].sentinel_share for c in cells for s in c.seeds]
    ys = [cost for c in cells for cost in c.costs]
    if len(set(xs)) < 2 or len(xs) < 3:
        return None
    fit = stats.linregress(xs, ys)
    t = float(stats.t.ppf(0.975, len(xs) - 2))
    a, a_err, k, k_err = float(fit.intercept), float(fit.intercept_stderr), float(fit.slope), float(fit.stderr)
    return (a, a - t * a_err, a + t * a_err), (k, k - t * k_err, k + t * k_err)


def welch(first: list[float], second: list[float]) -> tuple[float, float]:
    """The 95% interval of mean(first) - mean(second) (Welch's t); NaN ends with fewer than 2 of either."""
    if len(first) < 2 or len(second) < 2:
        return math.nan, math.nan
    span = stats.ttest_ind(first, second, equal_var=False).confidence_interval(0.95)
    return float(span.low), float(span.high)
