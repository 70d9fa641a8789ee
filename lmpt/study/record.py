"""The study's record: study.json, study.md and study_full.md, their tables and templates.

What a study writes into its directory: study.json (the plan, every search trial, each chosen recipe, every final
run's figures, the gains over the untrained controls and their verdicts: lmpt.study.gains) and study.md, tables that
fit a page: first the gains over the untrained controls, the objectives ranked by one stated rule (lmpt.study.rank_rule:
the gain on a zero-shot task), then per objective its recipe and headline figures, its search, the curves
(lmpt.study.curves), and the final runs ranked by the same task with their significance marks. study_full.md keeps
every figure, and lmpt.report writes every column of the ranked runs as ranking.md and ranking.csv, with ranking.png
(each run's figure with its 95% interval) and val_loss.png.

A study's tables in two sizes. study.md's fit a page: a handful of columns with short headers, each task's headline
figure only, recipes to 4 significant digits, the objectives in the order of RankRule. study_full.md keeps every
figure a final run logged."""

from __future__ import annotations

import dataclasses
import json
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lmpt.console import console
from lmpt.downstream.figures import (
    ACCURACY,
    ACCURACY_MEAN,
    EQUAL_LENGTH_ACCURACY,
    GLUE_SCORE_MEAN,
    PEARSON_MEAN,
    metric_key,
    task_figure,
)
from lmpt.errors import LmptError
from lmpt.report.control_gain import within_noise_sentence
from lmpt.report.crossover import CROSSOVER_PLOT, report_crossover
from lmpt.report.markdown import markdown_table, render
from lmpt.report.ranking import Ranking, is_bound, rank_runs
from lmpt.report.runs import RunSummary, read_run
from lmpt.report.significance import Significance, neighbour_significance, with_interval
from lmpt.safe_files import write_atomically
from lmpt.study.curves import CURVES_PNG, plot_curves
from lmpt.study.gains import GainTable, gain_verdicts, study_gains
from lmpt.study.plan import RECIPES_JSON, STUDY_JSON, StudyPlan
from lmpt.study.rank_rule import RankRule, rank_rule
from lmpt.study.runs import FinalRun, Search

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
    return render("lmpt.study", "gains.md.j2", gains=section) if section is not None else ""


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
    return render(
        "lmpt.study",
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


def _bound_note(objectives: list[str]) -> str:
    """What a bound objective's search ranks by, when the study has one."""
    bounds = [name for name in objectives if is_bound(name)]
    return f" ({', '.join(bounds)}: its bound over the yardstick's fixed passes of masks)" if bounds else ""


def study_full_markdown(plan: StudyPlan, summaries: dict[str, list[dict]]) -> str:
    """study_full.md (templates/study_full.md.j2): every figure of every objective at each budget, and every column of
    the ranked final runs (lmpt.report's ranking.md)."""
    rows = [row for budget_rows in summaries.values() for row in budget_rows]
    ranked = plan.directory / f"{RANKING}.md"
    return render(
        "lmpt.study",
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
