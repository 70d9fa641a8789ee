"""Which gaps in a ranking are noise: each ranked run's figure with its 95% interval, and a test of it against the run
ranked next, from the run's record of the task (RUN/downstream/TASK.json, lmpt.downstream.run_tasks).

- A zero-shot figure: its bootstrap interval over items from the record, and McNemar's exact test over the items
  both runs scored (the same items: equal digests).
- A fine-tuned figure (`_mean` over seeds): Student's t interval over the seeds and Welch's t-test between the two
  runs' seeds.
The neighbours' p-values are one family, Holm-corrected (lmpt.downstream.significance). A record that no longer
holds the logged figure (fine-tuned again since, with other settings) is not used."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from rich.markup import escape

from lmpt.console import warn
from lmpt.downstream.figures import METRIC_PREFIX, task_figure
from lmpt.downstream.records import DOWNSTREAM_DIR, task_record
from lmpt.downstream.significance import (
    LEVEL,
    bootstrap_interval,
    holm,
    mcnemar_exact,
    seed_interval,
    welch_t,
)
from lmpt.report.ranking import Ranking
from lmpt.report.runs import RunSummary
from lmpt.report.table import Column

MCNEMAR, WELCH = "McNemar", "Welch t"
SIGNIFICANT, NOT_DISTINGUISHABLE, UNTESTED = ">", "≈", "?"


@dataclass(frozen=True)
class Evidence:
    """What a run's record says about its ranked figure."""

    low: float | None = None
    high: float | None = None
    items: np.ndarray | None = None
    """Per item, right (True) or wrong: zero-shot."""
    digest: str | None = None
    seeds: np.ndarray | None = None
    """The figure per seed: of fine-tuning (a downstream figure), or of pre-training (a setting's pooled loss)."""
    contradiction: str = ""
    """Why the record cannot vouch for the logged figure (it holds another value, or is of the wrong type); "" when
    it can."""


@dataclass(frozen=True)
class Gap:
    """A ranked run against the run ranked next below it."""

    test: str | None = None
    """McNEMAR, WELCH, or None when the two could not be tested (`reason`)."""
    p: float | None = None
    adjusted: float | None = None
    """Holm-corrected over every gap of the table."""
    reason: str = ""

    @property
    def significant(self) -> bool | None:
        return None if self.adjusted is None else self.adjusted < 1 - LEVEL

    @property
    def mark(self) -> str:
        """`> p=0.003` (differs at 95%), `≈ p=0.41` (not distinguishable), `?` (untested)."""
        if self.adjusted is None:
            return UNTESTED
        return f"{SIGNIFICANT if self.significant else NOT_DISTINGUISHABLE} p={self.adjusted:.2g}"

    @property
    def described(self) -> str:
        return f"Holm-corrected {self.test} p={self.adjusted:.2g}"


@dataclass(frozen=True)
class Significance:
    """The ranked runs' evidence and the gaps between neighbours, keyed by id(run) (a gap by its upper run)."""

    key: str
    evidence: dict[int, Evidence]
    gaps: dict[int, Gap]
    order: list[int]
    """id() of the ranked runs, best first."""

    def interval(self, run: RunSummary) -> tuple[float, float] | None:
        found = self.evidence.get(id(run))
        return None if found is None or found.low is None or found.high is None else (found.low, found.high)

    def verdict(self) -> str:
        """Whether the top runs can be told apart, in one sentence, and how many neighbour gaps are significant."""
        gaps = [self.gaps[i] for i in self.order[:-1]]
        if not gaps:
            return ""
        first, tested = gaps[0], [g for g in gaps if g.adjusted is not None]
        if first.adjusted is None:
            sentence = f"The top 2 could not be tested against each other ({first.reason})."
        elif first.significant:
            sentence = f"The top run is ahead of the second at 95% ({first.described})."
        else:
            chain = [first]
            for gap in gaps[1:]:
                if gap.adjusted is None or gap.significant:
                    break
                chain.append(gap)
            tests = " / ".join(sorted({g.test for g in chain if g.test}))
            ps = ", ".join(f"{g.adjusted:.2g}" for g in chain)
            among = ": no gap between neighbours among them is significant" if len(chain) > 1 else ""
            top = f"The top {len(chain) + 1} are not distinguishable at 95%"
            sentence = f"{top}{among} (Holm-corrected {tests} p={ps})."
        if len(gaps) > 1:
            significant = sum(bool(g.significant) for g in tested)
            sentence += f" {significant} of {len(tested)} tested gaps between neighbours are significant."
        return sentence

    def contradiction(self, run: RunSummary) -> str:
        """Why the run's record cannot vouch for its logged figure, or ""."""
        found = self.evidence.get(id(run))
        return "" if found is None else found.contradiction


def legend(column: str, pooled: bool = False) -> str:
    """What the gap column (`column`) says: of a downstream figure, or (`pooled`) of a loss pooled over seeds."""
    if pooled:
        return (
            f"{column}: the setting against the one ranked next, Holm-corrected p of Welch's t-test over their seeds; "
            f"{SIGNIFICANT} differs at 95%, {NOT_DISTINGUISHABLE} not distinguishable, {UNTESTED} untested (fewer "
            "than two seeds)."
        )
    return (
        f"{column}: the run against the one ranked next, Holm-corrected p of McNemar's exact test over the same items "
        f"(zero-shot) or Welch's t-test over seeds (fine-tuned); {SIGNIFICANT} differs at 95%, {NOT_DISTINGUISHABLE} "
        f"not distinguishable, {UNTESTED} untested (no per-item or per-seed results, or a record that does not match "
        "the log)."
    )


MISMATCH = "record does not match the log"
MALFORMED = "record of the wrong type"


def read_evidence(run: RunSummary, key: str) -> Evidence | None:
    """The interval and per-item or per-seed results of `key` (`downstream/TASK/FIGURE`) in the run's record (read
    by the downstream codec, lmpt.downstream.records); None when there is no record of it, and an Evidence holding only
    its `contradiction` when the record holds another value than the log or is of the wrong type (each said in one
    warning naming the file)."""
    task, figure = task_figure(key).rsplit("/", 1)
    record, logged = task_record(run.path, task), run.downstream.get(key)
    if record is None:
        return None
    path = run.path / DOWNSTREAM_DIR / f"{task}.json"
    if figure.endswith("_mean"):  # fine-tuned: the figure per seed
        seeds = record.seed_figures(figure.removesuffix("_mean"))
        if seeds is None or None in seeds:
            return _contradicted(path, MALFORMED, f"per_seed holds no {figure.removesuffix('_mean')} per seed")
        if not seeds:
            return None
        mean = statistics.fmean(seeds)  # type: ignore[arg-type]
        if logged is not None and not math.isclose(mean, logged):
            return _contradicted(path, MISMATCH, f"its seeds' mean is {mean:.4f}, metrics.jsonl logged {logged:.4f}")
        interval = seed_interval(seeds)  # type: ignore[arg-type]
        low, high = interval or (None, None)
        return Evidence(low, high, seeds=np.asarray(seeds, dtype=np.float64))
    value = record.figure(figure)
    if value is None:
        return _contradicted(path, MALFORMED, f"{figure} is not a number") if record.malformed(figure) else None
    if logged is not None and not math.isclose(value, logged):
        return _contradicted(path, MISMATCH, f"it holds {figure} {value:.4f}, metrics.jsonl logged {logged:.4f}")
    items = record.items(figure)
    if items is not None and not math.isclose(float(items.mean()), value):
        items = None
    low, high = record.intervals.get(figure, (None, None))
    if (low is None or high is None) and items is not None:
        low, high = bootstrap_interval(items.astype(np.float64))
    return Evidence(low, high, items, record.digest)


def _contradicted(path: Path, what: str, detail: str) -> Evidence:
    """Evidence that only says why the record cannot vouch for the figure, said once on the console."""
    warn(escape(f"{path}: {what} ({detail}): its figure is shown untested, without an interval"))
    return Evidence(contradiction=what)


def gap_between(upper: Evidence | None, lower: Evidence | None) -> Gap:
    """The raw p of the upper run against the lower (not yet corrected), or why there is none."""
    flagged = [e.contradiction for e in (upper, lower) if e is not None and e.contradiction]
    if flagged:
        return Gap(reason=f"a {flagged[0]}")
    if upper is not None and lower is not None:
        if upper.items is not None and lower.items is not None:
            if upper.items.size != lower.items.size or (upper.digest and lower.digest and upper.digest != lower.digest):
                return Gap(reason="scored on different items")
            return Gap(MCNEMAR, mcnemar_exact(upper.items, lower.items))
        if upper.seeds is not None and lower.seeds is not None:
            p = welch_t(upper.seeds, lower.seeds)
            return Gap(reason="fewer than two seeds") if p is None else Gap(WELCH, p)
    return Gap(reason="no per-item or per-seed results in RUN/downstream/TASK.json")


SEEDS_OF_ONE_RECIPE = Gap(reason="two seeds of one recipe: their difference is the seed's, not a finding")
"""The gap between runs that differ only in trainer.seed: never tested (issue 63, point 12: "clm seed 1 > clm seed 0"
was once called significant)."""


def same_recipe(a: RunSummary, b: RunSummary) -> bool:
    """Whether `a` and `b` are one recipe trained from two seeds: the same objective and overrides but the seed."""

    def recipe(run: RunSummary) -> list[str]:
        return [o for o in run.overrides if not o.startswith("trainer.seed=")]

    return a.objective == b.objective and a.seed != b.seed and recipe(a) == recipe(b)


def neighbour_significance(ranked: list[RunSummary], ranking: Ranking) -> Significance | None:
    """Evidence of every ranked run and its gap to the next, Holm-corrected; None unless a downstream figure ranks."""
    if ranking.key is None or not ranking.key.startswith(METRIC_PREFIX):
        return None
    order = [r for r in ranked if ranking.value(r) is not None]
    evidence = {id(r): e for r in order if (e := read_evidence(r, ranking.key)) is not None}
    return tested_gaps(ranking.key, order, evidence)


def tested_gaps(key: str, order: list[RunSummary], evidence: dict[int, Evidence]) -> Significance:
    """Each of `order` (ranked best first) against the next, from their `evidence`, Holm-corrected as one family."""
    raw = {
        id(a): SEEDS_OF_ONE_RECIPE if same_recipe(a, b) else gap_between(evidence.get(id(a)), evidence.get(id(b)))
        for a, b in zip(order, order[1:], strict=False)
    }
    tested = [i for i, gap in raw.items() if gap.p is not None]
    adjusted = dict(zip(tested, holm([raw[i].p for i in tested]), strict=True))  # type: ignore[misc]
    gaps = {i: replace(gap, adjusted=adjusted.get(i)) for i, gap in raw.items()}
    return Significance(key, evidence, gaps, [id(r) for r in order])


def significance_columns(significance: Significance | None) -> list[Column]:
    """The CSV and Markdown columns after the others: the ranked figure's interval, and the gap to the next run."""
    if significance is None:
        return []
    figure, gap = task_figure(significance.key), significance.gaps.get
    digits = lambda v: "" if v is None else f"{v:.4f}"
    p_value = lambda v: "" if v is None else f"{v:.2g}"
    bound = lambda r, side: (significance.interval(r) or (None, None))[side]
    contradicted = any(e.contradiction for e in significance.evidence.values())
    flagged = [Column("record", significance.contradiction)] if contradicted else []
    return [
        Column(f"{figure}_low", lambda r: bound(r, 0), digits, numeric=True),
        Column(f"{figure}_high", lambda r: bound(r, 1), digits, numeric=True),
        Column("vs_next", lambda r: g.mark if (g := gap(id(r))) else None, lambda v: str(v or "")),
        Column("vs_next_test", lambda r: g.test if (g := gap(id(r))) else None, lambda v: str(v or "")),
        Column("vs_next_holm_p", lambda r: g.adjusted if (g := gap(id(r))) else None, p_value, numeric=True),
        *flagged,
    ]


def with_interval(value: float | None, interval: tuple[float, float] | None, digits: int = 3) -> str:
    """`0.612 [0.590, 0.634]`; the figure alone when it has no interval."""
    if value is None:
        return ""
    if interval is None:
        return f"{value:.{digits}f}"
    return f"{value:.{digits}f} [{interval[0]:.{digits}f}, {interval[1]:.{digits}f}]"
