"""The study's record room: study.json, study.md and study_full.md, their tables, the gains over the untrained
controls, and the curves.

What a study writes into its directory: study.json (the plan, every search trial, each chosen recipe, every final
run's figures) and study.md, tables that fit a page: first the gains over the untrained controls, the objectives
ranked by one stated rule (RankRule: the gain on a zero-shot task), then per objective its
recipe and headline figures, its search, and the final runs ranked by the same task with their significance marks.
study_full.md keeps every figure, and lmpt.report writes every column of the ranked runs as ranking.md and
ranking.csv, with ranking.png (each run's figure with its 95% interval) and val_loss.png.

A study's tables in two sizes. study.md's fit a page: a handful of columns with short headers, each task's headline
figure only, recipes to 4 significant digits, the objectives in the order of RankRule. study_full.md keeps every
figure a final run logged.

RankRule: the objectives are ordered by their gain over the untrained control on the first zero-shot task by name
(its accuracy over every item). A zero-shot score reads the pre-trained weights as they are and its control is the
same architecture untrained, so the gain is what pre-training gave. A fine-tuned task trains the control too and can
make up for what pre-training gave (or hide it), so it orders the objectives only when the study scored no zero-shot
task with a control.

Whether pre-training shows, per objective, task and budget: each final run's gain over its untrained control
(downstream.control=scratch, RUN/downstream/TASK.json's `gain`), pooled over the study's pre-training seeds.

- Zero-shot (the same items scored by every run and its control): the runs' per-item outcomes stacked as
  [seeds, items] and the gain's 95% interval drawn by the two-way bootstrap over (seed, item) of
  lmpt.downstream.significance; on minimal pairs also on the pairs of equal token length.
- Fine-tuned (no per-item outcomes kept across fine-tuning seeds): the mean of the runs' gains with Student's t
  interval over the pre-training seeds (one seed: that run's own paired interval); the gain of accuracy, or of a
  regression's the drop in squared error (`mse`).

`verdict` then says, per task, at which budget the best objective's gain is told apart from 0, or, when it is at
none of the budgets measured, the budget at which it would be: the gain's straight line in log budget through the
measured points, extended until it clears the interval's mean half-width (an extrapolation, said as one).

The curves of a study's final runs (`downstream.score_every`): each objective's zero-shot accuracy on each task's
fast subset as training went, against steps and training FLOPs (the budget the objectives share), one line per
final run coloured by objective with its 95% interval shaded, chance dashed. Written as STUDY/curves.png, which
study.md links; runs that logged no curve point (score_every=0) draw nothing."""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2
import numpy as np

from lmpt.config.budget import parse_budget
from lmpt.console import console
from lmpt.downstream.figures import (
    ACCURACY,
    ACCURACY_MEAN,
    CHANCE,
    CURVE_PREFIX,
    EQUAL_LENGTH_ACCURACY,
    GAIN,
    GLUE_SCORE_MEAN,
    MSE,
    PEARSON_MEAN,
    SCRATCH_ACCURACY,
    mean_of,
    metric_key,
    task_figure,
)
from lmpt.downstream.records import TaskRecord, task_record
from lmpt.downstream.significance import LEVEL, high_key, items_key, low_key, paired_gain, seed_interval
from lmpt.errors import LmptError
from lmpt.report.control_gain import within_noise_sentence
from lmpt.report.crossover import CROSSOVER_PLOT, report_crossover
from lmpt.report.markdown import markdown_table
from lmpt.report.ranking import Ranking, is_bound, rank_runs
from lmpt.report.runs import METRICS_FILE, RunSummary, read_records, read_run
from lmpt.report.significance import Significance, neighbour_significance, with_interval
from lmpt.safe_files import write_atomically
from lmpt.study.plan import RECIPES_JSON, STUDY_JSON, StudyPlan
from lmpt.study.runs import FinalRun, Search

if TYPE_CHECKING:
    from matplotlib.figure import Figure


STUDY_MD = "study.md"
STUDY_FULL_MD = "study_full.md"
RANKING = "ranking"
CURVES_PLOT = "val_loss.png"


def _write(path: Path, text: str) -> None:
    """Whole or absent (lmpt.safe_files.write_atomically)."""
    write_atomically(path, lambda tmp: tmp.write_text(text))


def _saved(path: Path, key: str | None = None) -> dict[str, Any] | None:
    """The JSON object `path` holds (its `key` when given), None when there is no such file; a file that is no study
    record is refused in one line."""
    if not path.exists():
        return None
    try:
        saved = json.loads(path.read_text())
        return saved if key is None else saved.get(key, {})
    except (OSError, ValueError, AttributeError):
        raise LmptError(f"{path} is not a study record: pick another study.dir or move it away") from None


def refuse_another_study(plan: StudyPlan) -> None:
    """A study directory whose study.json records another plan (other objectives, budget, space, trials, run keys),
    or whose recipes.json another search, is not resumed: its trials and runs answer another question."""
    described = {k: json.loads(json.dumps(v)) for k, v in plan.describe().items()}
    record, recipes = _saved(plan.directory / STUDY_JSON, "plan"), _saved(plan.directory / RECIPES_JSON) or {}
    differ = [k for k, v in described.items() if record is not None and v != record.get(k)]
    differ += [k for k in recipes if k not in differ and described.get(k) != recipes[k]]
    if differ:
        raise LmptError(
            f"{plan.directory} holds another study ({', '.join(differ)} differ from this command's): "
            "resume it with its own command, or pick another study.dir"
        )


def objective_summaries(
    plan: StudyPlan, searches: dict[str, Search], finals: dict[str, list[FinalRun]], ranking: Ranking, budget: str
) -> list[dict[str, Any]]:
    """Per objective at `budget`: its chosen recipe, its completed finals' val_loss and downstream figures (mean,
    sample std over seeds) and epochs, best first by `ranking`'s figure (objectives without it last, in study
    order)."""
    rows = []
    for name in plan.objectives:
        done = [f for f in finals.get(name, []) if f.status == "completed" and f.budget == budget]
        best = searches[name].chosen() if name in searches else None
        figures = sorted({k for f in done for k in f.downstream})
        row: dict[str, Any] = {
            "objective": name,
            "budget": budget,
            "recipe": best.recipe if best else None,
            "seeds_completed": len(done),
            "val_loss": mean_and_std([f.val_loss for f in done if f.val_loss is not None]),
            "downstream": {k: mean_and_std([f.downstream[k] for f in done if k in f.downstream]) for k in figures},
            "epochs": next((f.epochs for f in done if f.epochs is not None), None),
        }
        row["rank_value"] = (
            row["downstream"].get(ranking.key, (None,))[0]
            if ranking.higher_is_better
            else (row["val_loss"][0] if ranking.key == "val_loss" else None)
        )
        rows.append(row)
    scored = [r for r in rows if r["rank_value"] is not None]
    scored.sort(key=lambda r: r["rank_value"], reverse=ranking.higher_is_better)
    return scored + [r for r in rows if r["rank_value"] is None]


def _short_named(run: RunSummary) -> RunSummary:
    """The run with its overrides' numbers to 4 significant digits, as the report's tables and charts name it."""
    overrides = [short_override(o) for o in run.overrides]
    return dataclasses.replace(run, overrides=overrides, name=" ".join(overrides) or run.name)


def _in_rule_order(rows: list[dict[str, Any]], rule: RankRule, gains: GainTable, budget: str) -> list[dict[str, Any]]:
    """The objectives' rows at `budget` in the order of `rule` (as they came without a rule's task)."""
    if rule.task is None:
        return rows
    order = rule.order(gains, budget, [r["objective"] for r in rows])
    return sorted(rows, key=lambda r: order.index(r["objective"]))


def write_study(plan: StudyPlan, searches: dict[str, Search], finals: dict[str, list[FinalRun]]) -> Path:
    """study.json, study.md and study_full.md (and the ranked table of the final runs); returns study.json's path."""
    from lmpt.report.sweep import ReportFiles, write_report  # the sweep summary's table, ranking and marks

    gains = study_gains(plan.budgets, plan.objectives, finals)
    rule = rank_rule(gains, finals)
    largest = {name: [f for f in fs if f.budget == plan.budget] for name, fs in finals.items()}
    runs = [_short_named(read_run(f.path)) for fs in largest.values() for f in fs if f.path.is_dir()]
    chosen = rule.ranking() if rule.task is not None else None
    ranked, ranking = rank_runs(runs, chosen) if runs else ([], Ranking(None, "no final runs yet"))
    if runs:
        d = plan.directory
        files = ReportFiles(d / f"{RANKING}.csv", d / f"{RANKING}.md", d / CURVES_PLOT, d / f"{RANKING}.png")
        write_report(runs, files, f"{', '.join(plan.objectives)} at {plan.budget}", ranking=ranking)
    summaries = {
        b: _in_rule_order(objective_summaries(plan, searches, finals, ranking, b), rule, gains, b)
        for b in reversed(plan.budgets)
    }
    ranked_objectives = [s["objective"] for s in summaries[plan.budget] if s["rank_value"] is not None]
    if rule.task is not None:
        ranked_objectives = [
            s["objective"] for s in summaries[plan.budget] if rule.gain(gains, plan.budget, s["objective"]) is not None
        ]
    record = {
        "plan": plan.describe(),
        "ranking": {
            "key": ranking.key,
            "header": ranking.header,
            "higher_is_better": ranking.higher_is_better,
            "budget": plan.budget,
            "objectives_by": rule.sentence or ranking.header,
        },
        "objectives": {
            name: {
                "search": searches[name].describe() if name in searches else None,
                "finals": [f.describe() for f in finals.get(name, [])],
                "summaries": {b: next(s for s in rows if s["objective"] == name) for b, rows in summaries.items()},
            }
            for name in plan.objectives
        },
        "ranked_objectives": ranked_objectives,
        "gains": gains.describe(),
        "verdicts": gain_verdicts(gains),
    }
    every = [_short_named(read_run(f.path)) for fs in finals.values() for f in fs if f.path.is_dir()]
    record["crossover"] = report_crossover(every, plan.directory, f"{', '.join(plan.objectives)} over budgets")
    plot_curves(largest, plan.directory / CURVES_PNG)  # before study.md, which links it
    path = plan.directory / STUDY_JSON
    _write(path, json.dumps(record, indent=2, default=str) + "\n")
    caveat = rule.caveat(gains) if rule.task is not None else within_noise_sentence(ranked, ranking)
    names = {str(f.path): (f.objective, f.seed) for fs in largest.values() for f in fs}
    finals_section = final_runs_section(plan, ranked, names, ranking)
    crossover = record["crossover"]
    text = study_markdown(plan, searches, summaries, ranking, gains, rule, caveat, finals_section, list(crossover))
    _write(plan.directory / STUDY_MD, text)
    _write(plan.directory / STUDY_FULL_MD, study_full_markdown(plan, summaries))
    if rule.task is not None:  # the console's verdict is study.md's: the objectives by the one rule, with their gains
        from rich.markdown import Markdown

        console.print(Markdown(gains_markdown(gains, rule, plan.budgets, caveat)))
    return path


def gains_section(gains: GainTable, rule: RankRule, budgets: list[str], caveat: str = "") -> dict[str, Any] | None:
    """study.md's first section, the gains over the untrained controls: the rule that orders the objectives, a row
    per budget (the largest first) and objective, a column per task figure, then each task's verdict; None when no
    run had a control."""
    if not gains:
        return None
    verdicts = sorted(gain_verdicts(gains).items(), key=lambda item: item[0].split("/")[0] != rule.task)
    table = gains_table(gains, rule, budgets)
    return {"rule": rule.sentence, "caveat": caveat, "table": table, "verdicts": [s for _, s in verdicts]}


def gains_markdown(gains: GainTable, rule: RankRule, budgets: list[str], caveat: str = "") -> str:
    """The gains section alone, as study.md has it (the console prints it at the end of a study)."""
    section = gains_section(gains, rule, budgets, caveat)
    return _render("gains.md.j2", gains=section) if section is not None else ""


def weights_rule(weights: str) -> str:
    """Which weights every final run's tasks score (downstream.weights), in words."""
    if weights == "best":
        return "best weights by validation loss (RUN/best, `downstream.weights=best`)"
    return "last weights (the final model, `downstream.weights=last`)"


def final_runs_section(
    plan: StudyPlan, ranked: list[RunSummary], names: dict[str, tuple[str, int]], ranking: Ranking
) -> dict[str, Any] | None:
    """study.md's section on the final runs of the largest budget: ranked as `ranking` says, a handful of columns
    with the test against the next run, the charts; every column is in study_full.md. None without final runs."""
    if not ranked:
        return None
    from lmpt.report.significance import legend

    significance = neighbour_significance(ranked, ranking)
    verdict = significance.verdict() if significance is not None else ""
    noise = within_noise_sentence(ranked, ranking)  # a fine-tuned ranking whose every gain is within noise says so
    return {
        "header": " ".join(filter(None, [f"At {plan.budget}, {ranking.header}.", verdict, noise])),
        "table": final_runs_table(ranked, names, ranking, significance),
        "legend": legend("`vs next`") if significance is not None and significance.gaps else "",
        "charts": [chart for chart in (f"{RANKING}.png", CURVES_PLOT) if (plan.directory / chart).exists()],
    }


def study_markdown(
    plan: StudyPlan,
    searches: dict[str, Search],
    summaries: dict[str, list[dict]],
    ranking: Ranking,
    gains: GainTable,
    rule: RankRule,
    caveat: str = "",
    finals: dict[str, Any] | None = None,
    crossover: list[str] | None = None,
) -> str:
    """study.md (templates/study.md.j2), tables that fit a page: the plan; the gains over the untrained controls by
    budget, ordered by `rule` and said so, with `caveat` (that the order is no evidence) and the verdicts; the
    objectives at each budget in the same order (`ranking`'s when no gain is on record, `caveat` then under them);
    each search's trials; the curves; where an exact likelihood and a bound share bits per token over the budgets,
    the `crossover` findings and their plot; the final runs (`final_runs_section`). Every figure is in
    study_full.md."""
    several = len(plan.budgets) > 1
    if rule.task is not None:
        order = "In the order of the gains above at each budget."
    elif ranking.key:
        order = f"Best first at each budget, {ranking.header}."
    else:
        order = "Not ordered: the runs share no comparable figure."
    rows = [row for budget_rows in summaries.values() for row in budget_rows]
    return _render(
        "study.md.j2",
        name=plan.directory.name,
        objectives=", ".join(plan.objectives),
        at=f"each of the budgets {', '.join(plan.budgets)}" if several else f"`trainer.budget={plan.budget}`",
        seeds=", ".join(map(str, plan.seeds)),
        trials=plan.trials,
        sampler=plan.sampler,
        search_seed=plan.search_seed,
        search_budget=plan.search_budget,
        share=" (study.search_fraction of the largest budget; its recipe trains at every budget)" if several else "",
        steps=", ".join(f"{k} {v}" for k, v in plan.search_steps.items()),
        space=", ".join(f"`{k}={v}`" for k, v in plan.space.items()),
        bound_note=_bound_note(plan.objectives),
        run_keys=" ".join(plan.run_overrides) or "(defaults)",
        weights=weights_rule(plan.weights),
        gains=gains_section(gains, rule, list(reversed(plan.budgets)), caveat),
        order=order,
        objectives_caveat=caveat if rule.task is None else "",
        objectives_table=objectives_table(rows, several, first=rule.task),
        full_md=STUDY_FULL_MD,
        searches=[
            {"name": name, "table": search_table(searches[name])} for name in plan.objectives if name in searches
        ],
        curves=CURVES_PNG if (plan.directory / CURVES_PNG).exists() else "",
        crossover=crossover or [],
        crossover_plot=CROSSOVER_PLOT,
        finals=finals,
        ranking=RANKING,
    )


def search_table(search: Search) -> list[str]:
    """A search's trials: recipe (the chosen one marked), status, steps and final val_loss."""
    best = search.chosen()
    table = [
        [
            str(i),
            recipe_text(t.recipe) + (" (chosen)" if t is best else ""),
            t.status,
            str(t.steps if t.steps is not None else "—"),
            f"{t.val_loss:.4f}" if t.val_loss is not None else "—",
        ]
        for i, t in enumerate(search.trials)
    ]
    return markdown_table(["trial", "recipe", "status", "steps", "val_loss"], table, [False, False, False, True, True])


@functools.cache
def _templates() -> jinja2.Environment:
    """The study's documents' templates (lmpt/study/templates), each output line a line of its template."""
    return jinja2.Environment(
        loader=jinja2.PackageLoader("lmpt.study", "templates"),
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
        autoescape=False,
    )


def _render(template: str, **context: Any) -> str:
    return _templates().get_template(template).render(**context)


def _bound_note(objectives: list[str]) -> str:
    """What a bound objective's search ranks by, when the study has one."""
    bounds = [name for name in objectives if is_bound(name)]
    return f" ({', '.join(bounds)}: its bound over the yardstick's fixed passes of masks)" if bounds else ""


def study_full_markdown(plan: StudyPlan, summaries: dict[str, list[dict]]) -> str:
    """study_full.md (templates/study_full.md.j2): every figure of every objective at each budget, and every column of
    the ranked final runs (lmpt.report's ranking.md)."""
    rows = [row for budget_rows in summaries.values() for row in budget_rows]
    ranked = plan.directory / f"{RANKING}.md"
    return _render(
        "study_full.md.j2",
        name=plan.directory.name,
        objectives=", ".join(plan.objectives),
        study_md=STUDY_MD,
        objectives_table=objectives_table(rows, len(plan.budgets) > 1, full=True),
        budget=plan.budget,
        ranked=ranked.read_text().strip() if ranked.exists() else "",
    )


HEADLINES = (ACCURACY, GLUE_SCORE_MEAN, ACCURACY_MEAN, PEARSON_MEAN)
"""A task's headline figure, first found first: zero-shot accuracy, a GLUE task's official score, a fine-tuned
accuracy, a regression's Pearson."""
SHORT_FIGURES = {ACCURACY: "", EQUAL_LENGTH_ACCURACY: ", equal-length pairs"}
"""A gain column's header after the task's name, by figure."""


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
        return gains.get(budget, objective, self.task or "", ACCURACY)

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
        found = [self.gain(gains, b, o) for b in gains.budgets() for o in gains.objectives(b)]
        if any(g is not None and g.low > 0 for g in found):
            return ""
        return (
            f"No objective's gain on {self.task} is above 0 at 95% at any budget: at this scale the order is not "
            "evidence that one objective pre-trains better."
        )


def rank_rule(gains: GainTable, finals: dict[str, list[FinalRun]]) -> RankRule:
    """The study's RankRule: the first zero-shot task by name with a gain on record, else the first task with one."""
    tasks = sorted({task for task, figure in gains.task_figures() if figure == ACCURACY})
    logged = {key for runs in finals.values() for run in runs for key in run.downstream}
    zero_shot = [task for task in tasks if metric_key(task, ACCURACY) in logged]
    if zero_shot:
        return RankRule(zero_shot[0])
    return RankRule(tasks[0], zero_shot=False) if tasks else RankRule(None)


def gains_table(gains: GainTable, rule: RankRule, budgets: Sequence[str]) -> list[str]:
    """A row per budget (in `budgets`' order) and objective (in the rule's order), a column per task figure (the
    rule's task first): the pooled gain with its 95% interval, * where it leaves out 0."""
    columns = sorted(gains.task_figures(), key=lambda column: column[0] != rule.task)  # stable: the rest by name
    header = ["budget", "objective", *(f"{t}{SHORT_FIGURES.get(f, ' ' + f)}" for t, f in columns)]
    rows = []
    for budget in [b for b in budgets if b in gains.budgets()]:
        for name in rule.order(gains, budget, gains.objectives(budget)):
            cells = [gains.get(budget, name, t, f) for t, f in columns]
            rows.append([budget, name, *(str(g) if g is not None else "—" for g in cells)])
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


FIGURES = (ACCURACY, EQUAL_LENGTH_ACCURACY)
"""The figures whose gain the study pools: accuracy, and on minimal pairs accuracy on the pairs of equal length."""


FIGURE_WORDS = {
    ACCURACY: "accuracy",
    EQUAL_LENGTH_ACCURACY: "pairs of equal token length",
    MSE: "drop in squared error",
}


@dataclass(frozen=True)
class PooledGain:
    """An objective's gain over its untrained control on one task figure at one budget, over its seeds."""

    gain: float
    low: float
    high: float
    seeds: int
    method: str

    @property
    def significant(self) -> bool:
        return self.low > 0 or self.high < 0

    def describe(self) -> dict[str, Any]:
        return {
            "gain": self.gain,
            "interval": [self.low, self.high],
            "significant": self.significant,
            "seeds": self.seeds,
            "method": self.method,
            "level": LEVEL,
        }

    def __str__(self) -> str:
        mark = " *" if self.significant else ""
        return f"{self.gain:+.3f} [{self.low:+.3f}, {self.high:+.3f}]{mark}"


@dataclass(frozen=True)
class GainRow:
    """One pooled gain: an objective's gain over its untrained control on a task's figure at a budget."""

    budget: str
    objective: str
    task: str
    figure: str
    gain: PooledGain


@dataclass
class GainTable:
    """The study's gains over the untrained controls as flat rows, in the order they were pooled (budget, objective,
    task, figure); `flagged`: a sentence for each record left out because it does not match its run's log."""

    rows: list[GainRow] = field(default_factory=list)
    flagged: list[str] = field(default_factory=list)
    levels: dict[tuple[str, str, str], tuple[list[float], float]] = field(default_factory=dict)
    """(budget, objective, task) -> the runs' own zero-shot accuracies (a seed each) and the task's chance level, to
    say when a significant gain leaves an accuracy at chance."""

    def __bool__(self) -> bool:
        return bool(self.rows)

    def budgets(self) -> list[str]:
        """Every budget with a gain, in order."""
        return list(dict.fromkeys(r.budget for r in self.rows))

    def objectives(self, budget: str) -> list[str]:
        """Every objective with a gain at `budget`, in order."""
        return list(dict.fromkeys(r.objective for r in self.rows if r.budget == budget))

    def get(self, budget: str, objective: str, task: str, figure: str) -> PooledGain | None:
        """The pooled gain of `objective` on `task`'s `figure` at `budget`, None when there is none."""
        found = (
            r.gain for r in self.rows if (r.budget, r.objective, r.task, r.figure) == (budget, objective, task, figure)
        )
        return next(found, None)

    def task_figures(self) -> list[tuple[str, str]]:
        """Every (task, figure) with a pooled gain at some budget for some objective, sorted."""
        return sorted({(r.task, r.figure) for r in self.rows})

    def describe(self) -> dict:
        """The table as study.json keeps it: budget -> objective -> task -> figure -> the gain."""
        nested: dict = {}
        for r in self.rows:
            nested.setdefault(r.budget, {}).setdefault(r.objective, {}).setdefault(r.task, {})[r.figure] = (
                r.gain.describe()
            )
        return nested


def _record(run: FinalRun, task: str, flagged: list[str] | None = None) -> TaskRecord | None:
    """The run's record of `task` (read by the downstream codec) when it holds gains over a control and agrees with
    the figures the run logged (metrics.jsonl); a record that does not is left out, with a sentence naming it in
    `flagged`."""
    record = task_record(run.path, task)
    if record is None or record.gains is None:
        return None
    mismatch = _mismatch(run, task, record)
    if mismatch:
        if flagged is not None:
            flagged.append(
                f"{run.path / 'downstream' / f'{task}.json'} does not match its run's log ({mismatch}): "
                "its gain is left out of the study's."
            )
        return None
    return record


def _mean(outcomes: np.ndarray | None) -> float | None:
    return float(outcomes.mean()) if outcomes is not None and outcomes.size else None


def _zero_shot_record(record: TaskRecord) -> bool:
    """Whether the record keeps per-item outcomes (zero-shot) rather than per-seed figures (fine-tuned)."""
    return items_key(ACCURACY) in record.given


def gain_figure(record: TaskRecord) -> str:
    """The figure whose gain over the control a record keeps: a regression's squared error, else accuracy."""
    return MSE if record.gain(ACCURACY) is None and record.gain(MSE) is not None else ACCURACY


def _mismatch(run: FinalRun, task: str, record: TaskRecord) -> str:
    """What in `record` differs from the figures `run` logged for `task` (each compared where both hold it), or "".
    The figures pooled are the record's per-item outcomes (zero-shot) or gains (fine-tuned): they must be the ones
    the run's own scoring logged."""
    figure = gain_figure(record)
    gain = record.gain(figure)
    held = {f"{figure}_{GAIN}": gain.gain if gain is not None else None}
    if _zero_shot_record(record):
        held[ACCURACY] = _mean(record.items(ACCURACY))
        held[SCRATCH_ACCURACY] = _mean(record.control.items(ACCURACY) if record.control is not None else None)
    else:
        held[mean_of(figure)] = record.figure(mean_of(figure))
    for figure, value in held.items():
        logged = run.downstream.get(metric_key(task, figure))
        if logged is not None and (value is None or not math.isclose(value, logged, abs_tol=1e-9)):
            shown = "none" if value is None else f"{value:.4f}"
            return f"{figure} {shown} where metrics.jsonl logged {logged:.4f}"
    return ""


def _zero_shot(records: list[TaskRecord], figure: str) -> PooledGain | None:
    """The two-way bootstrap over the runs' and their controls' per-item outcomes (None: a record lacks them)."""
    rows, controls, masks = [], [], []
    for record in records:
        correct = record.items(ACCURACY)
        control = record.control.items(ACCURACY) if record.control is not None else None
        if correct is None or control is None or correct.shape != control.shape:
            return None
        rows.append(correct)
        controls.append(control)
        if figure == EQUAL_LENGTH_ACCURACY:
            mask = record.equal_length()
            if mask is None or mask.shape != correct.shape:
                return None
            masks.append(mask)
    if len({r.shape for r in rows}) > 1:
        return None
    keep = np.logical_and.reduce(masks) if masks else np.ones_like(rows[0])
    if not keep.any():
        return None
    result = paired_gain(np.stack(rows)[:, keep], np.stack(controls)[:, keep])
    low, high = result["interval"]
    return PooledGain(result["gain"], low, high, len(rows), "two-way bootstrap over (seed, item)")


def _fine_tuned(records: list[TaskRecord], figure: str = ACCURACY) -> PooledGain | None:
    """The runs' fine-tuned gains of `figure`: their mean, t interval over the pre-training seeds (one seed: its
    own)."""
    entries = [r.gain(figure) for r in records]
    if not all(e is not None and e.gain is not None for e in entries):
        return None
    gains = [float(e.gain) for e in entries]  # type: ignore[union-attr,arg-type]
    if len(gains) == 1:
        interval = entries[0].interval  # type: ignore[union-attr]
        if interval is None:
            return None
        low, high = interval
        return PooledGain(gains[0], low, high, 1, "paired bootstrap over fine-tuning seeds and items")
    interval = seed_interval(gains)
    assert interval is not None
    return PooledGain(float(np.mean(gains)), *interval, len(gains), "t over pre-training seeds")


def pooled_gains(runs: list[FinalRun], task: str, flagged: list[str] | None = None) -> dict[str, PooledGain]:
    """By figure, the completed `runs`' (one objective, one budget) gain over their controls on `task`; empty when a
    run has no control on record, or a record that does not match its run's log (said in `flagged`)."""
    records = [_record(r, task, flagged) for r in runs if r.status == "completed"]
    if not records or any(r is None for r in records):
        return {}
    found = [r for r in records if r is not None]
    if all(_zero_shot_record(r) for r in found):  # zero-shot: per-item outcomes kept
        gains = {figure: _zero_shot(found, figure) for figure in FIGURES}
    else:
        figure = gain_figure(found[0])
        gains = {figure: _fine_tuned(found, figure)}
    return {figure: g for figure, g in gains.items() if g is not None}


def study_gains(budgets: list[str], objectives: list[str], finals: dict[str, list[FinalRun]]) -> GainTable:
    """The pooled gain of every objective at every budget on every figure of every task the runs recorded (the
    study's own: lmpt.study.runs reads no other), each record checked against its run's log."""
    table = GainTable()
    for budget in budgets:
        for name in objectives:
            runs = [f for f in finals.get(name, []) if f.budget == budget and f.status == "completed"]
            tasks = sorted({t for f in runs for t in f.tasks})
            for task in tasks:
                gains = pooled_gains(runs, task, table.flagged)
                table.rows += [GainRow(budget, name, task, figure, gain) for figure, gain in gains.items()]
                accuracies = [
                    f.downstream[metric_key(task, ACCURACY)] for f in runs if metric_key(task, ACCURACY) in f.downstream
                ]
                chances = {
                    f.downstream[metric_key(task, CHANCE)] for f in runs if metric_key(task, CHANCE) in f.downstream
                }
                if accuracies and len(chances) == 1:
                    table.levels[(budget, name, task)] = (accuracies, chances.pop())
    return table


def at_chance(table: GainTable, budget: str, objective: str, task: str) -> str:
    """ ", but its accuracy ... is at chance ..." where the objective's own accuracy on `task` at `budget` is not told
    apart from the task's chance level (its 95% interval over the seeds holds it, or lies below), else ""."""
    found = table.levels.get((budget, objective, task))
    if found is None:
        return ""
    accuracies, chance = found
    interval = seed_interval(accuracies)
    if interval is None or interval[0] > chance:
        return ""
    mean = sum(accuracies) / len(accuracies)
    return (
        f"; but its accuracy, {mean:.3f} [{interval[0]:.3f}, {interval[1]:.3f}], is not above chance ({chance:.3f}): "
        "the gain lifts an untrained control below chance toward it, which is no sign of what pre-training taught"
    )


def _log_amount(budget: str) -> float:
    parsed = parse_budget(budget)
    assert parsed is not None
    return math.log10(parsed.amount)


def _unit(budget: str) -> str:
    parsed = parse_budget(budget)
    assert parsed is not None
    return parsed.unit


def verdict(table: GainTable, task: str, figure: str = ACCURACY) -> str:
    """One sentence on `task`'s `figure`: the smallest budget at which the best objective's gain over its control is
    significantly above 0, or, at none, the budget its line in log budget reaches significance (or that it does
    not grow); "" when no budget has a gain on record."""
    budgets = list(dict.fromkeys(r.budget for r in table.rows if (r.task, r.figure) == (task, figure)))
    if not budgets:
        return ""
    what = task if figure == ACCURACY else f"{task} ({FIGURE_WORDS.get(figure, figure)})"
    for budget in budgets:
        best = _best(table, budget, task, figure)
        if best is not None and best[1].significant and best[1].gain > 0:
            chance = at_chance(table, budget, best[0], task) if figure == ACCURACY else ""
            return (
                f"On {what}, {best[0]}'s gain over its untrained control is significant at {budget}: "
                f"{best[1]} (95%, {best[1].method}){chance}."
            )
    top = _best(table, budgets[-1], task, figure)
    assert top is not None
    name = top[0]
    points = [(b, table.get(b, name, task, figure)) for b in budgets]
    known = [(b, g) for b, g in points if g is not None]
    measured = "; ".join(f"{b} {g}" for b, g in known)
    head = f"On {what}, no objective's gain over its untrained control is significantly above 0 at any budget measured"
    if len(known) < 2:
        return f"{head} ({name}: {measured}); measure a second budget to say where it would be."
    x = np.array([_log_amount(b) for b, _ in known])
    y = np.array([g.gain for _, g in known])
    slope, intercept = np.polyfit(x, y, 1)
    half = float(np.mean([(g.high - g.low) / 2 for _, g in known]))
    if slope <= 0:
        return (
            f"{head} ({name}: {measured}), and the gain does not grow with the budget: this task will not "
            "measure pre-training on this data by a larger budget alone."
        )
    at = 10 ** ((half - intercept) / slope)
    unit = _unit(budgets[0])
    caveat = _how_uncertain(x, known, half, unit)
    return (
        f"{head} ({name}: {measured}). {caveat} Extrapolated, a straight line in log budget through these points, "
        f"the gain would clear its ±{half:.3f} interval at about {at:.1e}{unit}."
    )


def _how_uncertain(x: np.ndarray, known: list[tuple[str, PooledGain]], half: float, unit: str) -> str:
    """How far the extrapolated budget can be trusted: the line's slope with its 95% range, weighting each point by
    its interval (its half-width read as 1.96 standard errors), and the budgets that range puts the crossing at."""
    y = np.array([g.gain for _, g in known])
    weight = 1 / np.array([max((g.high - g.low) / 2 / 1.96, 1e-12) for _, g in known]) ** 2
    xw, yw = np.average(x, weights=weight), np.average(y, weights=weight)
    spread = float(np.sum(weight * (x - xw) ** 2))
    slope = float(np.sum(weight * (x - xw) * (y - yw)) / spread)
    low, high = slope - 1.96 / math.sqrt(spread), slope + 1.96 / math.sqrt(spread)
    text = f"Uncertain: the gains' 95% intervals allow a slope of {low:+.3f} to {high:+.3f} a decade of budget"
    crossings = sorted(10 ** (xw + (half - yw) / b) for b in (low, high) if b > 0)
    if low <= 0:
        near = f" (nearest {crossings[0]:.1e}{unit})" if crossings else ""
        return f"{text}, which holds 0: the gain may never clear its interval by budget alone{near}."
    return f"{text}, which puts that budget anywhere from {crossings[0]:.1e} to {crossings[-1]:.1e}{unit}."


def _best(table: GainTable, budget: str, task: str, figure: str) -> tuple[str, PooledGain] | None:
    """The objective with the largest gain on `task`'s `figure` at `budget`, and the gain."""
    found = [(r.objective, r.gain) for r in table.rows if (r.budget, r.task, r.figure) == (budget, task, figure)]
    return max(found, key=lambda p: p[1].gain) if found else None


def gain_verdicts(table: GainTable) -> dict[str, str]:
    """`verdict` of every task's accuracy, and of its equal-length pairs where it has them (`TASK/FIGURE`), then a
    sentence for each record left out (`mismatch/N`)."""
    sentences = {f"{task}/{figure}": verdict(table, task, figure) for task, figure in table.task_figures()}
    sentences |= {f"mismatch/{i}": s for i, s in enumerate(table.flagged)}
    return {key: sentence for key, sentence in sentences.items() if sentence}


CURVES_PNG = "curves.png"
X_AXES = {"step": "step", "training FLOPs": "flops"}
"""Each column's x axis: its label, and the key of a curve point that holds it."""


def curve_points(run_dir: Path) -> dict[str, list[dict[str, float | None]]]:
    """Task -> the run's curve points in step order, each {step, flops, accuracy, accuracy_low, accuracy_high,
    chance} as far as logged (a step logged twice keeps its last point)."""
    by_task: dict[str, dict[int, dict[str, float | None]]] = defaultdict(dict)
    for record in read_records(run_dir / METRICS_FILE):
        for key, value in record.items():
            if not key.startswith(CURVE_PREFIX) or not isinstance(value, int | float):
                continue
            task, _, figure = key.removeprefix(CURVE_PREFIX).rpartition("/")
            point = by_task[task].setdefault(record["step"], {"step": record["step"], "flops": record.get("flops")})
            point[figure] = value
    return {task: [points[s] for s in sorted(points)] for task, points in sorted(by_task.items())}


def plot_curves(finals: dict[str, list[FinalRun]], path: Path) -> bool:
    """`draw_curves` written as a PNG at `path`; False (nothing written) when no final run logged a curve point."""
    fig = draw_curves(finals)
    if fig is None:
        return False
    fig.savefig(path, format="png")
    return True


def draw_curves(finals: dict[str, list[FinalRun]]) -> Figure | None:
    """A row per task, a column per x axis (X_AXES), a line per final run; None when no run logged a curve point."""
    runs = [(objective, curve_points(f.path)) for objective, fs in finals.items() for f in fs]
    tasks = sorted({task for _, curves in runs for task in curves})
    if not tasks:
        return None
    from matplotlib.figure import Figure

    colour = {objective: f"C{i}" for i, objective in enumerate(finals)}
    fig = Figure(figsize=(12, 4 * len(tasks)), dpi=110, layout="constrained")
    axes = fig.subplots(len(tasks), len(X_AXES), squeeze=False)
    for row, task in zip(axes, tasks, strict=True):
        for ax, (x_label, x_key) in zip(row, X_AXES.items(), strict=True):
            _draw(ax, runs, task, x_key, colour)
            ax.set_xlabel(x_label)
            ax.set_ylabel(f"{task} {ACCURACY} (fast subset)")
            ax.grid(True, alpha=0.3)
        entries = len(row[0].get_legend_handles_labels()[1])  # above the panel, in a row: inside, it hid curves
        row[0].legend(
            fontsize="small", loc="lower left", bbox_to_anchor=(0, 1.01), ncols=max(entries, 1), frameon=False
        )
    fig.suptitle("zero-shot accuracy during training (downstream.score_every), 95% intervals shaded")
    return fig


def _draw(ax, runs: list[tuple[str, dict]], task: str, x_key: str, colour: dict[str, str]) -> None:
    """Every run's curve of `task` on `ax` against `x_key`; chance as a dashed line."""
    labelled: set[str] = set()
    for objective, curves in runs:
        points = [p for p in curves.get(task, []) if p.get(x_key) is not None and ACCURACY in p]
        if not points:
            continue
        xs = [p[x_key] for p in points]
        label = objective if objective not in labelled else None
        labelled.add(objective)
        ax.plot(xs, [p[ACCURACY] for p in points], color=colour[objective], marker="o", markersize=3, label=label)
        if all(low_key(ACCURACY) in p and high_key(ACCURACY) in p for p in points):
            lows, highs = [p[low_key(ACCURACY)] for p in points], [p[high_key(ACCURACY)] for p in points]
            ax.fill_between(xs, lows, highs, color=colour[objective], alpha=0.12, linewidth=0)
    chances = {p[CHANCE] for _, curves in runs for p in curves.get(task, []) if CHANCE in p}
    if len(chances) == 1:
        ax.axhline(chances.pop(), color="grey", linestyle="--", linewidth=1, label="chance")
