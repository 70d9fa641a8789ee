"""What a study writes into its directory: study.json (the plan, every search trial, each chosen recipe, every final
run's figures) and study.md, tables that fit a page: first the gains over the untrained controls, the objectives
ranked by one stated rule (lmpt.study.tables.RankRule: the gain on a zero-shot task), then per objective its
recipe and headline figures, its search, and the final runs ranked by the same task with their significance marks.
study_full.md keeps every figure, and lmpt.report writes every column of the ranked runs as ranking.md and
ranking.csv, with ranking.png (each run's figure with its 95% interval) and val_loss.png."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from lmpt.console import console
from lmpt.errors import LmptError
from lmpt.report.control_gain import within_noise_sentence
from lmpt.report.crossover import CROSSOVER_PLOT, report_crossover
from lmpt.report.ranking import Ranking, is_bound, rank_runs
from lmpt.report.runs import RunSummary, read_run
from lmpt.report.significance import neighbour_significance
from lmpt.safe_files import write_atomically
from lmpt.study.curves import CURVES_PNG, plot_curves
from lmpt.study.finals import FinalRun
from lmpt.study.gains import GainTable, describe_gains, gain_verdicts, study_gains
from lmpt.study.plan import StudyPlan
from lmpt.study.search import Search
from lmpt.study.tables import (
    RankRule,
    final_runs_table,
    gains_table,
    markdown_table,
    mean_and_std,
    objectives_table,
    rank_rule,
    recipe_text,
    short_override,
)

STUDY_JSON = "study.json"
STUDY_MD = "study.md"
STUDY_FULL_MD = "study_full.md"
RANKING = "ranking"
CURVES_PLOT = "val_loss.png"


def _write(path: Path, text: str) -> None:
    """Whole or absent (lmpt.safe_files.write_atomically)."""
    write_atomically(path, lambda tmp: tmp.write_text(text))


def refuse_another_study(plan: StudyPlan) -> None:
    """A study directory whose study.json records another plan (other objectives, budget, space, trials, run keys)
    is not resumed: its trials and runs answer another question."""
    path = plan.directory / STUDY_JSON
    if not path.exists():
        return
    try:
        saved = json.loads(path.read_text()).get("plan", {})
    except (OSError, ValueError, AttributeError):
        raise LmptError(f"{path} is not a study record: pick another study.dir or move it away") from None
    differ = [k for k, v in plan.describe().items() if json.loads(json.dumps(v)) != saved.get(k)]
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
        "gains": describe_gains(gains),
        "verdicts": gain_verdicts(gains),
    }
    every = [_short_named(read_run(f.path)) for fs in finals.values() for f in fs if f.path.is_dir()]
    record["crossover"] = report_crossover(every, plan.directory, f"{', '.join(plan.objectives)} over budgets")
    plot_curves(largest, plan.directory / CURVES_PNG)  # before study.md, which links it
    path = plan.directory / STUDY_JSON
    _write(path, json.dumps(record, indent=2, default=str) + "\n")
    caveat = rule.caveat(gains) if rule.task is not None else within_noise_sentence(ranked, ranking)
    names = {str(f.path): (f.objective, f.seed) for fs in largest.values() for f in fs}
    finals_lines = final_runs_markdown(plan, ranked, names, ranking)
    crossover = record["crossover"]
    text = study_markdown(plan, searches, summaries, ranking, gains, rule, caveat, finals_lines, list(crossover))
    _write(plan.directory / STUDY_MD, text)
    _write(plan.directory / STUDY_FULL_MD, study_full_markdown(plan, summaries))
    if rule.task is not None:  # the console's verdict is study.md's: the objectives by the one rule, with their gains
        from rich.markdown import Markdown

        console.print(Markdown("\n".join(gains_markdown(gains, rule, plan.budgets, caveat))))
    return path


def gains_markdown(gains: GainTable, rule: RankRule, budgets: list[str], caveat: str = "") -> list[str]:
    """study.md's first section, the gains over the untrained controls: the rule that orders the objectives, a row
    per budget (the largest first) and objective, a column per task figure, then each task's verdict; nothing when no
    run had a control."""
    if not gains:
        return []
    lines = [
        "",
        "## Gain over the untrained control",
        "",
        rule.sentence,
        *(["", caveat] if caveat else []),
        "",
        "Each objective's figure less its untrained control's (the same architecture freshly initialised, scored or "
        "fine-tuned the same way; `downstream.control=scratch`), pooled over the pre-training seeds, with its 95% "
        "interval: zero-shot by the two-way bootstrap over (seed, item), fine-tuned by t over the seeds. * the "
        "interval leaves out 0.",
        "",
        *gains_table(gains, rule, budgets),
    ]
    verdicts = sorted(gain_verdicts(gains).items(), key=lambda item: item[0].split("/")[0] != rule.task)
    return [*lines, "", *(f"- {sentence}" for _, sentence in verdicts)]


def weights_rule(weights: str) -> str:
    """Which weights every final run's tasks score (downstream.weights), in words."""
    if weights == "best":
        return "best weights by validation loss (RUN/best, `downstream.weights=best`)"
    return "last weights (the final model, `downstream.weights=last`)"


def final_runs_markdown(
    plan: StudyPlan, ranked: list[RunSummary], names: dict[str, tuple[str, int]], ranking: Ranking
) -> list[str]:
    """study.md's section on the final runs of the largest budget: ranked as `ranking` says, a handful of columns
    with the test against the next run, the charts; every column is in study_full.md."""
    if not ranked:
        return []
    from lmpt.report.significance import legend

    significance = neighbour_significance(ranked, ranking)
    verdict = significance.verdict() if significance is not None else ""
    noise = within_noise_sentence(ranked, ranking)  # a fine-tuned ranking whose every gain is within noise says so
    header = " ".join(filter(None, [f"At {plan.budget}, {ranking.header}.", verdict, noise]))
    lines = ["## Final runs", "", header, ""]
    lines += final_runs_table(ranked, names, ranking, significance)
    if significance is not None and significance.gaps:
        lines += ["", legend("`vs next`")]
    lines += [
        "",
        f"Every column of these runs (losses, speed, FLOPs, time): [{STUDY_FULL_MD}]({STUDY_FULL_MD}), "
        f"also {RANKING}.md and {RANKING}.csv.",
        "",
    ]
    for chart in (f"{RANKING}.png", CURVES_PLOT):
        if (plan.directory / chart).exists():
            lines += [f"![{chart}]({chart})", ""]
    return lines


def study_markdown(
    plan: StudyPlan,
    searches: dict[str, Search],
    summaries: dict[str, list[dict]],
    ranking: Ranking,
    gains: GainTable,
    rule: RankRule,
    caveat: str = "",
    final_runs: list[str] | None = None,
    crossover: list[str] | None = None,
) -> str:
    """study.md, tables that fit a page: the plan; the gains over the untrained controls by budget, ordered by
    `rule` and said so, with `caveat` (that the order is no evidence) and the verdicts; the objectives at each budget
    in the same order (`ranking`'s when no gain is on record, `caveat` then under them); each search's trials; the
    curves; where an exact likelihood and a bound share bits per token over the budgets, the `crossover` findings
    and their plot; `final_runs` (final_runs_markdown). Every figure is in study_full.md."""
    space = ", ".join(f"`{k}={v}`" for k, v in plan.space.items())
    steps = ", ".join(f"{k} {v}" for k, v in plan.search_steps.items())
    several = len(plan.budgets) > 1
    at = f"each of the budgets {', '.join(plan.budgets)}" if several else f"`trainer.budget={plan.budget}`"
    share = " (study.search_fraction of the largest budget; its recipe trains at every budget)" if several else ""
    lines = [
        f"# Study {plan.directory.name}",
        "",
        f"Objectives {', '.join(plan.objectives)} at {at} per run, seeds {', '.join(map(str, plan.seeds))}. Each "
        f"objective's learning rate was searched with {plan.trials} trials (recipes drawn before any ran: "
        f"{plan.sampler} sampler, seed {plan.search_seed}) at `trainer.budget={plan.search_budget}`{share} "
        f"(about {steps} steps) over {space}, by its own final val_loss{_bound_note(plan.objectives)}.",
        f"Run keys of every run: `{' '.join(plan.run_overrides) or '(defaults)'}`.",
        f"One rule for every objective: the tasks score each run's {weights_rule(plan.weights)}.",
    ]
    lines += gains_markdown(gains, rule, list(reversed(plan.budgets)), caveat)
    if rule.task is not None:
        order = "In the order of the gains above at each budget."
    elif ranking.key:
        order = f"Best first at each budget, {ranking.header}."
    else:
        order = "Not ordered: the runs share no comparable figure."
    lines += ["", "## Objectives", "", order, "", *([caveat, ""] if caveat and rule.task is None else [])]
    rows = [row for budget_rows in summaries.values() for row in budget_rows]
    lines += objectives_table(rows, several, first=rule.task)
    lines += [
        "",
        f"Mean ± std over the seeds; each task's headline figure (zero-shot accuracy, fine-tuned dev "
        f"accuracy). Every figure: [{STUDY_FULL_MD}]({STUDY_FULL_MD}).",
        "",
        "## Searches",
        "",
    ]
    for name in plan.objectives:
        search = searches.get(name)
        if search is None:
            continue
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
        header = ["trial", "recipe", "status", "steps", "val_loss"]
        lines += [f"### {name}", "", *markdown_table(header, table, [False, False, False, True, True]), ""]
    if (plan.directory / CURVES_PNG).exists():
        lines += [
            "## Curves",
            "",
            "Each final run's zero-shot accuracy on the fast subsets while it trained "
            "(`downstream.score_every`), against steps and training FLOPs:",
            "",
            f"![curves]({CURVES_PNG})",
            "",
        ]
    if crossover:
        lines += [
            "## Bits per token against compute",
            "",
            *(f"- {c}" for c in crossover),
            "",
            f"![crossover]({CROSSOVER_PLOT})",
            "",
        ]
    lines += final_runs or []
    return "\n".join(lines) + "\n"


def _bound_note(objectives: list[str]) -> str:
    """What a bound objective's search ranks by, when the study has one."""
    bounds = [name for name in objectives if is_bound(name)]
    return f" ({', '.join(bounds)}: its bound over the yardstick's fixed passes of masks)" if bounds else ""


def study_full_markdown(plan: StudyPlan, summaries: dict[str, list[dict]]) -> str:
    """study_full.md: every figure of every objective at each budget, and every column of the ranked final runs
    (lmpt.report's ranking.md)."""
    rows = [row for budget_rows in summaries.values() for row in budget_rows]
    lines = [
        f"# Study {plan.directory.name}: every figure",
        "",
        f"The full tables behind [{STUDY_MD}]({STUDY_MD}).",
        "",
        "## Objectives: every figure",
        "",
        "Mean ± std over the seeds.",
        "",
        *objectives_table(rows, len(plan.budgets) > 1, full=True),
        "",
    ]
    ranked = plan.directory / f"{RANKING}.md"
    if ranked.exists():
        lines += [f"## Final runs at {plan.budget}: every column", "", ranked.read_text().strip(), ""]
    return "\n".join(lines) + "\n"
