"""A study's tables in two sizes. study.md's fit a page: a handful of columns with short headers, each task's headline
figure only, recipes to 4 significant digits, the objectives in the order of RankRule. study_full.md keeps every
figure a final run logged.

RankRule: the objectives are ordered by their gain over the untrained control on the first zero-shot task by name
(its accuracy over every item). A zero-shot score reads the pre-trained weights as they are and its control is the
same architecture untrained, so the gain is what pre-training gave. A fine-tuned task trains the control too and can
make up for what pre-training gave (or hide it), so it orders the objectives only when the study scored no zero-shot
task with a control."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lmpt.downstream.figures import (
    ACCURACY,
    ACCURACY_MEAN,
    EQUAL_LENGTH_ACCURACY,
    GLUE_SCORE_MEAN,
    PEARSON_MEAN,
    metric_key,
    task_figure,
)
from lmpt.report.ranking import Ranking
from lmpt.report.runs import RunSummary
from lmpt.report.significance import Significance, with_interval
from lmpt.study.finals import FinalRun
from lmpt.study.gains import GainTable, PooledGain, task_figures

HEADLINES = (ACCURACY, GLUE_SCORE_MEAN, ACCURACY_MEAN, PEARSON_MEAN)
"""A task's headline figure, first found first: zero-shot accuracy, a GLUE task's official score, a fine-tuned
accuracy, a regression's Pearson."""
SHORT_FIGURES = {ACCURACY: "", EQUAL_LENGTH_ACCURACY: ", equal-length pairs"}
"""A gain column's header after the task's name, by figure."""


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]], numeric: Sequence[bool] = ()) -> list[str]:
    """GitHub Markdown lines of a table; a column is right-aligned where `numeric` says so."""
    align = [("---:" if i < len(numeric) and numeric[i] else "---") for i in range(len(header))]
    escape = lambda text: str(text).replace("|", "\\|").replace("\n", " ")
    return ["| " + " | ".join(map(escape, row)) + " |" for row in [header, align, *rows]]


def short_number(value: str) -> str:
    """A number to 4 significant digits (0.02511949870636483 -> 0.02512); anything else as it is."""
    try:
        number = float(value)
    except ValueError:
        return value
    return value if number.is_integer() and "." not in value and "e" not in value.lower() else f"{number:.4g}"


def recipe_text(recipe: dict[str, str] | None) -> str:
    """A recipe for a table: its numbers to 4 significant digits (study.json keeps them whole)."""
    return " ".join(f"{k}={short_number(v)}" for k, v in (recipe or {}).items()) or "—"


def short_override(override: str) -> str:
    """`key=value` with a number value to 4 significant digits, for a run's name on a table or a chart."""
    key, sep, value = override.partition("=")
    return f"{key}{sep}{short_number(value)}" if sep else override


def mean_std(mean: float | None, std: float | None, digits: int = 4) -> str:
    """`mean ± std` (the mean alone over one seed, — without one)."""
    if mean is None:
        return "—"
    return f"{mean:.{digits}f}" + (f" ± {std:.{digits}f}" if std is not None else "")


def mean_and_std(values: list[float]) -> tuple[float | None, float | None]:
    """The mean and sample std of `values` (None for what they cannot give)."""
    if not values:
        return None, None
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else None


@dataclass(frozen=True)
class RankRule:
    """Which task's gain over the untrained control orders a study's objectives (module docstring)."""

    task: str | None
    """None when no final run's record holds a gain over a control."""
    zero_shot: bool = True

    @property
    def key(self) -> str | None:
        """The final runs' figure of the task (`downstream/TASK/accuracy`, fine-tuned `.../accuracy_mean`)."""
        return None if self.task is None else metric_key(self.task, ACCURACY if self.zero_shot else ACCURACY_MEAN)

    @property
    def sentence(self) -> str:
        """The rule in words, for study.md and the document built on it; "" without a task."""
        if self.task is None:
            return ""
        if self.zero_shot:
            return (
                f"Ranked by the gain over the untrained control on {self.task}, zero-shot (the first zero-shot "
                "task by name, accuracy over all its items): a zero-shot score reads the pre-trained weights as "
                "they are, and the control is the same architecture untrained, so the gain is what pre-training "
                "gave. Fine-tuned tasks are shown, not ranked by: fine-tuning trains the control too and can make "
                "up for what pre-training gave."
            )
        return (
            f"Ranked by the gain over the untrained control on {self.task}, fine-tuned (the first task by name "
            "with a control): the study scored no zero-shot task with a control, whose gain would read the "
            "pre-trained weights as they are."
        )

    def gain(self, gains: GainTable, budget: str, objective: str) -> PooledGain | None:
        """The objective's pooled gain on the rule's task at `budget`."""
        return gains.get(budget, {}).get(objective, {}).get(self.task or "", {}).get(ACCURACY)

    def order(self, gains: GainTable, budget: str, objectives: Sequence[str]) -> list[str]:
        """`objectives` by their gain at `budget`, largest first (those without one after, in their order)."""
        found = {name: g.gain for name in objectives if (g := self.gain(gains, budget, name)) is not None}
        return sorted(found, key=lambda name: -found[name]) + [n for n in objectives if n not in found]

    def ranking(self) -> Ranking:
        """How the final runs are ranked by the same rule: by their figure of the task (its interval and tests)."""
        assert self.key is not None
        kind = "zero-shot" if self.zero_shot else "fine-tuned"
        return Ranking(
            self.key,
            f"ranked by {task_figure(self.key)} (higher is better), {kind}: each run's own figure; the objectives "
            "are ordered by their gain over the untrained control on it (the gain table, as in study.md)",
            higher_is_better=True,
        )

    def caveat(self, gains: GainTable) -> str:
        """One sentence when no objective's gain on the task clears 0 at any budget; "" otherwise."""
        if self.task is None:
            return ""
        found = [self.gain(gains, b, o) for b in gains for o in gains[b]]
        if any(g is not None and g.low > 0 for g in found):
            return ""
        return (
            f"No objective's gain on {self.task} is above 0 at 95% at any budget: at this scale the order is not "
            "evidence that one objective pre-trains better."
        )


def rank_rule(gains: GainTable, finals: dict[str, list[FinalRun]]) -> RankRule:
    """The study's RankRule: the first zero-shot task by name with a gain on record, else the first task with one."""
    tasks = sorted({task for task, figure in task_figures(gains) if figure == ACCURACY})
    logged = {key for runs in finals.values() for run in runs for key in run.downstream}
    zero_shot = [task for task in tasks if metric_key(task, ACCURACY) in logged]
    if zero_shot:
        return RankRule(zero_shot[0])
    return RankRule(tasks[0], zero_shot=False) if tasks else RankRule(None)


def gains_table(gains: GainTable, rule: RankRule, budgets: Sequence[str]) -> list[str]:
    """A row per budget (in `budgets`' order) and objective (in the rule's order), a column per task figure (the
    rule's task first): the pooled gain with its 95% interval, * where it leaves out 0."""
    columns = sorted(task_figures(gains), key=lambda column: column[0] != rule.task)  # stable: the rest by name
    header = ["budget", "objective", *(f"{t}{SHORT_FIGURES.get(f, ' ' + f)}" for t, f in columns)]
    rows = []
    for budget in [b for b in budgets if b in gains]:
        for name in rule.order(gains, budget, list(gains[budget])):
            tasks = gains[budget][name]
            rows.append([budget, name, *(str(tasks.get(t, {}).get(f, "—")) for t, f in columns)])
    return markdown_table(header, rows, [False, False, *[True] * len(columns)])


def headline_keys(rows: Sequence[dict[str, Any]], first: str | None = None) -> list[str]:
    """Per task the objectives' rows hold (`first` first, the rest by name), its headline figure (HEADLINES)."""
    keys = {k for row in rows for k in row["downstream"]}
    tasks = sorted({task_figure(k).rsplit("/", 1)[0] for k in keys}, key=lambda task: (task != first, task))
    found = [[metric_key(t, f) for f in HEADLINES if metric_key(t, f) in keys] for t in tasks]
    return [k[0] for k in found if k]


def objectives_table(
    rows: Sequence[dict[str, Any]], several: bool, full: bool = False, first: str | None = None
) -> list[str]:
    """The objectives' summaries (lmpt.study.record.objective_summaries), mean ± std over seeds: each task's headline
    figure under the task's name (`first`'s first), or with `full` every figure under its `TASK/FIGURE` name and the
    epochs."""
    keys = sorted({k for row in rows for k in row["downstream"]}) if full else headline_keys(rows, first)
    names = [task_figure(k) if full else task_figure(k).rsplit("/", 1)[0] for k in keys]
    header = ["objective", *(["budget"] if several else []), "chosen recipe", "seeds", "val_loss (own)", *names]
    digits = 4 if full else 3
    table = []
    for row in rows:
        cells = [row["objective"], *([row["budget"]] if several else []), recipe_text(row["recipe"])]
        pairs = [row["val_loss"], *(row["downstream"].get(k, (None, None)) for k in keys)]
        cells += [str(row["seeds_completed"]), *(mean_std(mean, std, digits=digits) for mean, std in pairs)]
        if full:
            cells.append(f"{row['epochs']:.2f}" if row["epochs"] is not None else "—")
        table.append(cells)
    numeric = [False] * (2 + several) + [True] * (len(header) - 2 - several + full)
    return markdown_table([*header, *(["epochs"] if full else [])], table, numeric)


def final_runs_table(
    ranked: Sequence[RunSummary], names: dict[str, tuple[str, int]], ranking: Ranking, significance: Significance | None
) -> list[str]:
    """The final runs best first by `ranking`: objective, seed, step, val_loss, the ranked figure with its 95% interval
    and the test against the run ranked next. `names`: each run directory's (objective, seed)."""
    figure = task_figure(ranking.key) if ranking.key else None
    header = ["objective", "seed", "step", "val_loss (own)", *([f"{figure} [95%]", "vs next"] if figure else [])]
    rows = []
    for run in ranked:
        objective, seed = names.get(str(run.path), (run.objective or run.name, -1))
        cells = [objective, str(seed) if seed >= 0 else "—", str(run.step if run.step is not None else "—")]
        cells.append(f"{run.val_loss:.4f}" if run.val_loss is not None else "—")
        if figure:
            value = ranking.value(run)
            interval = significance.interval(run) if significance else None
            gap = significance.gaps.get(id(run)) if significance else None
            cells += [with_interval(value, interval) or "—", gap.mark if gap else ""]
        rows.append(cells)
    return markdown_table(header, rows, [False, True, True, True, True, False])
