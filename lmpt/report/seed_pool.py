"""A loss-ranked table's seeds: a setting run over several pre-training seeds (`trainer.seed=0,1,2` in a sweep) is one
row, its ranked loss the mean over the seeds with their spread (sample std) and a 95% Student's t interval, each gap
to the next setting tested by Welch's t over the seeds (Holm-corrected, lmpt.report.significance). A ranking with one
seed per setting cannot say how sure it is, and says so.

A setting is a run's command-line overrides less its `trainer.seed=`; runs of one setting pool only when their seeds
differ (two copies of one seed are not two samples). Every other column of a pooled row is the mean over its seeds."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from lmpt.downstream.significance import seed_interval
from lmpt.report.ranking import Ranking
from lmpt.report.runs import RunSummary
from lmpt.report.significance import Evidence, Significance, tested_gaps
from lmpt.report.table import Column

SEED_OVERRIDE = "trainer.seed="


@dataclass(frozen=True)
class SeedPool:
    """The table's rows with each setting's seeds pooled, the ranking they are ranked by, and the gaps' tests."""

    rows: list[RunSummary]
    """Best first; runs without the ranked loss (failed, still running) after, one row each."""
    ranking: Ranking
    significance: Significance


def setting_of(run: RunSummary) -> tuple[str, ...]:
    """The run's overrides less its seed: what the runs of one setting share."""
    return tuple(o for o in run.overrides if not o.startswith(SEED_OVERRIDE))


def _mean(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.fmean(known) if known else None


def _mean_curve(curves: list[list[tuple[int, float]]]) -> list[tuple[int, float]]:
    """The mean over the curves at each step they all have."""
    steps = set.intersection(*({s for s, _ in c} for c in curves))
    by_step = [dict(c) for c in curves]
    return [(s, statistics.fmean(c[s] for c in by_step)) for s in sorted(steps)]


def pooled_run(members: list[RunSummary]) -> RunSummary:
    """One row for a setting's runs: every figure the mean over the seeds that have it, each curve the mean at the
    steps every seed evaluated."""
    first = members[0]
    keys = lambda field: sorted({k for m in members for k in getattr(m, field)})
    compute = set.intersection(*(set(m.compute_at) for m in members))
    statuses = sorted({m.status for m in members})
    return RunSummary(
        path=first.path.parent,
        name=" ".join(setting_of(first)),
        overrides=list(setting_of(first)),
        objective=first.objective,
        status=statuses[0] if len(statuses) == 1 else "; ".join(statuses),
        step=max((m.step for m in members if m.step is not None), default=None),
        val_loss=_mean([m.val_loss for m in members]),
        val_ppl=_mean([m.val_ppl for m in members]),
        fixed_loss=_mean([m.fixed_loss for m in members]),
        fixed_ppl=_mean([m.fixed_ppl for m in members]),
        eval_mask_prob=first.eval_mask_prob,
        measures={k: v for k in keys("measures") if (v := _mean([m.measures.get(k) for m in members])) is not None},
        tokens_per_s=_mean([m.tokens_per_s for m in members]),
        loss_tokens_per_s=_mean([m.loss_tokens_per_s for m in members]),
        flops=_mean([m.flops for m in members]),
        wall_s=_mean([m.wall_s for m in members]),
        downstream_s=_mean([m.downstream_s for m in members]),
        val_curve=_mean_curve([m.val_curve for m in members]),
        fixed_curve=_mean_curve([m.fixed_curve for m in members]),
        train_curve=_mean_curve([m.train_curve for m in members]),
        compute_at={
            s: (
                statistics.fmean(m.compute_at[s][0] for m in members),
                round(statistics.fmean(m.compute_at[s][1] for m in members)),
            )
            for s in sorted(compute)
        },
        downstream={
            k: v for k in keys("downstream") if (v := _mean([m.downstream.get(k) for m in members])) is not None
        },
        seed=None,
        members=members,
    )


def _seed_list(seeds: Sequence[int | None]) -> str:
    return ", ".join("?" if s is None else str(s) for s in seeds)


def pool_seeds(runs: list[RunSummary], ranking: Ranking) -> SeedPool | None:
    """Each setting's runs over distinct seeds as one row, ranked by the mean of `ranking`'s loss, with the gaps
    between neighbours tested over the seeds; None unless a loss ranks and some setting has two or more seeds."""
    if ranking.key is None or ranking.higher_is_better:
        return None
    groups: dict[tuple[str, ...], list[RunSummary]] = {}
    for run in runs:
        if ranking.value(run) is not None and run.overrides and run.seed is not None:
            groups.setdefault(setting_of(run), []).append(run)
    poolable = [g for g in groups.values() if len(g) > 1 and len({r.seed for r in g}) == len(g)]
    if not poolable:
        return None
    pooled_ids = {id(r) for g in poolable for r in g}
    rows = [pooled_run(sorted(g, key=lambda r: r.seed or 0)) for g in poolable]
    rows += [r for r in runs if id(r) not in pooled_ids and ranking.value(r) is not None]
    # a setting whose mean is NaN or infinite (a diverged seed's) never ranks, as a single run's never does: it goes
    # after the ranked rows, untested, shown as it is
    diverged = [r for r in rows if not math.isfinite(float(ranking.value(r)))]  # type: ignore[arg-type]
    rows = sorted((r for r in rows if r not in diverged), key=lambda r: float(ranking.value(r)))  # type: ignore[arg-type]
    evidence = {id(r): _loss_evidence(r, ranking) for r in rows}
    significance = tested_gaps(ranking.key, rows, evidence)
    seeds = sorted({s for r in rows for s in r.seeds if s is not None})
    header = (
        f"{ranking.header}; each setting's runs over trainer.seed={','.join(map(str, seeds))} pooled into one row: "
        "the mean over its seeds, their std and a 95% t interval"
    )
    unranked = [r for r in runs if ranking.value(r) is None]
    return SeedPool(rows + diverged + unranked, replace(ranking, header=header), significance)


def _loss_evidence(row: RunSummary, ranking: Ranking) -> Evidence:
    """A row's ranked loss per seed, with its t interval (none for a row of one seed)."""
    values = [ranking.value(m) for m in row.members] if row.members else [ranking.value(row)]
    interval = seed_interval(values)  # type: ignore[arg-type]
    low, high = interval or (None, None)
    return Evidence(low, high, seeds=np.asarray(values, dtype=np.float64))


def seed_columns(pool: SeedPool) -> list[Column]:
    """The columns a pooled table adds: each row's seeds and the spread of its ranked loss over them."""
    spread = lambda r: (
        float(np.std(e.seeds, ddof=1))
        if (e := pool.significance.evidence.get(id(r))) is not None and e.seeds is not None and e.seeds.size > 1
        else None
    )
    digits = lambda v: "" if v is None else f"{v:.4f}"
    return [
        Column("seeds", lambda r: _seed_list(r.seeds), str),
        Column(f"{pool.ranking.key}_std", spread, digits, numeric=True),
    ]


def one_seed_caveat(runs: list[RunSummary], ranking: Ranking) -> str:
    """One sentence when a loss ranks runs of one seed each (no setting run over several): the gaps may be seed
    noise; "" otherwise."""
    ranked = [r for r in runs if ranking.value(r) is not None]
    if ranking.key is None or ranking.higher_is_better or len(ranked) < 2:
        return ""
    seeds = sorted({s for r in ranked for s in r.seeds if s is not None})
    which = f" (trainer.seed={','.join(map(str, seeds))})" if seeds else ""
    if len(seeds) > 1:
        which = f" (seeds {_seed_list(seeds)}, one per setting)"
    return (
        f"One seed per run{which}: the ranking cannot say how sure it is, and a gap may be seed-to-seed noise; "
        "sweep trainer.seed=0,1,2 as well to pool each setting's seeds into a mean with a 95% interval."
    )
