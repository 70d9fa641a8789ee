"""Which figure a table of runs may rank by, and the header that says so.

A downstream figure (lmpt.downstream.run_tasks: a fine-tuned or zero-shot accuracy on one task) ranks runs
of any objective and architecture, so it comes first when every completed run has one.

A run's val_loss is measured on its own task: an mlm run at its own masking rate, a clm run on next-token
prediction. Ranking is only honest on a loss every run measured the same way: the fixed-rate masked-token
loss (val_fixed_loss, at one shared eval_mask_prob) among masked runs, or val_loss when every run has the
same objective and no fixed-rate loss exists. Likelihood models (clm, mdlm) share one more yardstick: held-out bits
per token on the same windows (val_bits_per_token), exact for clm and an upper bound for masked diffusion; runs
that include a bound are ranked by it, first, with the header saying which figures are bounds."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lmpt.downstream.figures import ACCURACY, ACCURACY_MEAN, ACCURACY_NORM, GLUE_SCORE_MEAN, PEARSON_MEAN
from lmpt.report.runs import RunSummary

if TYPE_CHECKING:
    from lmpt.objectives.measure import Measure

BITS_PER_TOKEN = "val_bits_per_token"  # lmpt.objectives.yardstick.BITS_PER_TOKEN: the report imports no torch

DOWNSTREAM_PREFERENCE = (ACCURACY, ACCURACY_NORM, GLUE_SCORE_MEAN, ACCURACY_MEAN, PEARSON_MEAN)
"""Downstream figures a table may rank by, first found first, tasks by name: a zero-shot accuracy first, as a study
ranks (lmpt.study.rank_rule: a zero-shot score reads the pre-trained weights as they are, while fine-tuning
trains the control too and can make up for what pre-training gave), then a GLUE task's official score (its official
figures' mean: MRPC's F1 and accuracy, STS-B's Pearson and Spearman ...), a fine-tuned accuracy, and a regression's
dev Pearson last; a fine-tuned figure's seeds tested by Welch's t."""


@dataclass(frozen=True)
class Ranking:
    key: str | None
    """val_fixed_loss, val_loss, or None when the runs share no comparable loss (rows keep their order)."""
    header: str
    """One sentence for the table's title: what the rows are ranked by, and why."""
    higher_is_better: bool = False
    """True for a downstream figure (an accuracy), False for a loss."""

    @property
    def curve(self) -> Callable[[RunSummary], list[tuple[int, float]]]:
        """Each run's (step, loss) curve of the ranked loss (val_loss when unranked); bits per token: the last
        evaluation's point (a bound's yardstick is computed there only)."""
        if self.key == BITS_PER_TOKEN:
            return lambda r: (
                [] if r.step is None or BITS_PER_TOKEN not in r.measures else [(r.step, r.measures[BITS_PER_TOKEN])]
            )
        return (lambda r: r.fixed_curve) if self.key == "val_fixed_loss" else (lambda r: r.val_curve)

    def value(self, run: RunSummary) -> float | None:
        """The run's ranked figure or loss (None when it has none, or nothing is ranked)."""
        if self.key is None:
            return None
        if self.higher_is_better:
            return run.downstream.get(self.key)
        if self.key == BITS_PER_TOKEN:
            return run.measures.get(BITS_PER_TOKEN)
        return run.fixed_loss if self.key == "val_fixed_loss" else run.val_loss

    @property
    def label(self) -> str:
        if self.key == BITS_PER_TOKEN:
            return "validation bits per token (a diffusion figure is an upper bound)"
        if self.key == "val_fixed_loss":
            return "validation loss at the fixed masking rate"
        return "validation loss (each run's own objective)"


def loss_family(objective: str | None) -> str | None:
    """The run's objective's loss family (Objective.loss_family): "next-token" runs (clm, mtp: its main head's loss)
    report the same val_loss on the same windows, "masked" ones (mlm, nsp, electra) a masked-token loss."""
    from lmpt.objectives.registry import objective_class  # here: the objectives bring torch, most reports need none

    cls = objective_class(str(objective))
    return cls.loss_family if cls is not None else None


def _measure_class(objective: str | None) -> type[Measure] | None:
    """The run's objective's measure (Objective.measure_class); None for an objective lmpt does not know."""
    from lmpt.objectives.registry import objective_class

    cls = objective_class(str(objective))
    return cls.measure_class if cls is not None else None


def on_bits_axis(objective: str | None) -> bool:
    """Whether the run's objective's measure puts its yardstick on the bits-per-token axis (an exact likelihood or a
    bound)."""
    measure = _measure_class(objective)
    return measure is not None and measure.likelihood is not None


def is_bound(objective: str | None) -> bool:
    """Whether the run's objective's yardstick is an upper bound on the likelihood (mdlm's), not the exact figure."""
    measure = _measure_class(objective)
    return measure is not None and measure.bound


def bits_ranking(evaluated: list[RunSummary]) -> Ranking | None:
    """By held-out bits per token when every evaluated run has the figure and one of them is a bound (mdlm); a clm
    table keeps its usual ranking (val_loss orders it the same)."""
    if not evaluated or any(r.measures.get(BITS_PER_TOKEN) is None for r in evaluated):
        return None
    bounds = sorted({str(r.objective) for r in evaluated if is_bound(r.objective)})
    if not bounds:
        return None
    return Ranking(
        BITS_PER_TOKEN,
        f"ranked by {BITS_PER_TOKEN}: held-out bits per token on the same windows, exact for clm; the "
        f"{', '.join(bounds)} figures are upper bounds on their negative log-likelihood (fixed draws, "
        f"{BITS_PER_TOKEN}_stderr their standard error), so a bound below a clm figure is a win",
    )


def downstream_figure(runs: list[RunSummary]) -> str | None:
    """The downstream figure every completed run has, in DOWNSTREAM_PREFERENCE's order (a zero-shot accuracy first,
    as a study ranks), tasks in name order; None when there is none."""
    completed = [r for r in runs if r.status == "completed"]
    if not completed:
        return None
    shared = set.intersection(*(set(r.downstream) for r in completed))
    for figure in DOWNSTREAM_PREFERENCE:
        keys = sorted(k for k in shared if k.endswith(f"/{figure}"))
        if keys:
            return keys[0]
    return None


def choose_ranking(runs: list[RunSummary]) -> Ranking:
    """Bits per token when the runs are likelihood models one of which is a bound (bits_ranking); a downstream figure
    when every completed run has one (the same task scored the same way whatever the
    objective or architecture); else the fixed-rate loss when every evaluated run has one at the same rate; val_loss
    when they all share an objective without one; otherwise none."""
    bits = bits_ranking([r for r in runs if r.val_loss is not None])
    if bits is not None:
        return bits
    figure = downstream_figure(runs)
    if figure is not None:
        return Ranking(
            figure,
            f"ranked by {figure} (higher is better): a downstream figure every completed run has, the same task "
            "scored the same way whatever the objective and architecture",
            higher_is_better=True,
        )
    evaluated = [r for r in runs if r.val_loss is not None]
    rates = {r.eval_mask_prob for r in evaluated}
    if evaluated and all(r.fixed_loss is not None for r in evaluated) and len(rates) == 1:
        return Ranking(
            "val_fixed_loss",
            f"ranked by val_fixed_loss: masked-token loss at the shared eval_mask_prob={rates.pop():g}, the same "
            "masked positions in every run (val_loss is each run at its own training masking rate)",
        )
    objectives = {r.objective for r in evaluated}
    if len(objectives) > 1 and {loss_family(o) for o in objectives} == {"next-token"}:
        return Ranking("val_loss", "ranked by val_loss: next-token loss, mtp runs' main head scored as clm's")
    if len(objectives) == 1 and not any(r.fixed_loss is not None for r in evaluated):
        (objective,) = objectives
        caveat = (
            " (each at its own masking rate: runs that differ in mask_prob are scored on different tasks)"
            if loss_family(objective) == "masked"
            else ""
        )
        return Ranking("val_loss", f"ranked by val_loss{caveat}")
    return Ranking(
        None,
        "not ranked: these runs share no comparable validation loss (val_loss is each objective's own task; "
        "val_fixed_loss compares masked runs at one rate); compare the curves against FLOPs",
    )


def rank_runs(runs: list[RunSummary], ranking: Ranking | None = None) -> tuple[list[RunSummary], Ranking]:
    """The runs best first by `ranking` (by default the chosen loss or figure, choose_ranking; runs without it after,
    in their order), and the ranking."""
    ranking = ranking or choose_ranking(runs)
    if ranking.key is None:
        return list(runs), ranking
    values = {id(r): ranking.value(r) for r in runs}
    # a NaN or infinite figure (a diverged run's) never ranks: it goes after the scored runs, shown as it is
    scored = [r for r in runs if values[id(r)] is not None and math.isfinite(float(values[id(r)]))]  # type: ignore[arg-type]
    scored.sort(key=lambda r: float(values[id(r)]), reverse=ranking.higher_is_better)  # type: ignore[arg-type]
    ranked = {id(r) for r in scored}
    return scored + [r for r in runs if id(r) not in ranked], ranking
