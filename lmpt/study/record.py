"""What a study writes into its directory: study.json (the plan, every search trial, each chosen recipe, every final
run's figures) and study.md (the same as tables: per objective its search and its finals' mean over seeds, ranked
by the figure lmpt.report ranks the final runs by, then that ranked table of the runs with its significance marks,
written by lmpt.report as ranking.md and ranking.csv, with ranking.png (the ranked downstream figure of each run
with its 95% interval) and val_loss.png). When no final run's gain over its from-scratch control is told apart from
0, study.md says that the task does not measure pre-training at this scale."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from lmpt.errors import LmptError
from lmpt.report.control_gain import within_noise_sentence
from lmpt.report.ranking import Ranking, rank_runs
from lmpt.report.runs import read_run
from lmpt.safe_files import write_atomically
from lmpt.study.curves import CURVES_PNG, plot_curves
from lmpt.study.finals import FinalRun
from lmpt.study.gains import FIGURE_WORDS, GainTable, describe_gains, gain_verdicts, study_gains, task_figures
from lmpt.study.plan import StudyPlan
from lmpt.study.search import Search

STUDY_JSON = "study.json"
STUDY_MD = "study.md"
RANKING = "ranking"
CURVES_PLOT = "val_loss.png"


def _write(path: Path, text: str) -> None:
    """Whole or absent (lmpt.safe_files.write_atomically)."""
    write_atomically(path, lambda tmp: tmp.write_text(text))


def _mean_std(values: list[float]) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else None


def recipe_text(recipe: dict[str, str] | None) -> str:
    """A recipe for a table: its numbers to 4 significant digits (study.json keeps them whole)."""

    def short(value: str) -> str:
        try:
            return f"{float(value):.4g}"
        except ValueError:
            return value

    return " ".join(f"{k}={short(v)}" for k, v in (recipe or {}).items()) or "—"


def _cell(mean: float | None, std: float | None, digits: int = 4) -> str:
    if mean is None:
        return "—"
    return f"{mean:.{digits}f}" + (f" ± {std:.{digits}f}" if std is not None else "")


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
        raise LmptError(f"{plan.directory} holds another study ({', '.join(differ)} differ from this command's): "
                        "resume it with its own command, or pick another study.dir")  # fmt: skip


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
            "val_loss": _mean_std([f.val_loss for f in done if f.val_loss is not None]),
            "downstream": {k: _mean_std([f.downstream[k] for f in done if k in f.downstream]) for k in figures},
            "epochs": next((f.epochs for f in done if f.epochs is not None), None),
        }
        row["rank_value"] = row["downstream"].get(ranking.key, (None,))[0] if ranking.higher_is_better else (
            row["val_loss"][0] if ranking.key == "val_loss" else None)  # fmt: skip
        rows.append(row)
    scored = [r for r in rows if r["rank_value"] is not None]
    scored.sort(key=lambda r: r["rank_value"], reverse=ranking.higher_is_better)
    return scored + [r for r in rows if r["rank_value"] is None]


def write_study(plan: StudyPlan, searches: dict[str, Search], finals: dict[str, list[FinalRun]]) -> Path:
    """study.json and study.md (and the ranked table of the final runs); returns study.json's path."""
    from lmpt.report.sweep import ReportFiles, write_report  # the sweep summary's table, ranking and marks

    largest = {name: [f for f in fs if f.budget == plan.budget] for name, fs in finals.items()}
    runs = [read_run(f.path) for fs in largest.values() for f in fs if f.path.is_dir()]
    ranked, ranking = rank_runs(runs) if runs else ([], Ranking(None, "no final runs yet"))
    if runs:
        d = plan.directory
        files = ReportFiles(d / f"{RANKING}.csv", d / f"{RANKING}.md", d / CURVES_PLOT, d / f"{RANKING}.png")
        write_report(runs, files, f"study {d.name} at {plan.budget}")
    summaries = {b: objective_summaries(plan, searches, finals, ranking, b) for b in reversed(plan.budgets)}
    gains = study_gains(plan.budgets, plan.objectives, finals)
    record = {
        "plan": plan.describe(),
        "ranking": {
            "key": ranking.key,
            "header": ranking.header,
            "higher_is_better": ranking.higher_is_better,
            "budget": plan.budget,
        },
        "objectives": {
            name: {
                "search": searches[name].describe() if name in searches else None,
                "finals": [f.describe() for f in finals.get(name, [])],
                "summaries": {b: next(s for s in rows if s["objective"] == name) for b, rows in summaries.items()},
            }
            for name in plan.objectives
        },
        "ranked_objectives": [s["objective"] for s in summaries[plan.budget] if s["rank_value"] is not None],
        "gains": describe_gains(gains),
        "verdicts": gain_verdicts(gains),
    }
    plot_curves(largest, plan.directory / CURVES_PNG)  # before study.md, which links it
    path = plan.directory / STUDY_JSON
    _write(path, json.dumps(record, indent=2, default=str) + "\n")
    caveat = within_noise_sentence(ranked, ranking)
    _write(plan.directory / STUDY_MD, study_markdown(plan, searches, summaries, ranking, gains, caveat))
    return path


def gains_markdown(gains: GainTable) -> list[str]:
    """study.md's section on the gains over the untrained controls: a row per budget and objective, a column per
    task figure, then each task's verdict; nothing when no run had a control."""
    columns = task_figures(gains)
    if not columns:
        return []
    lines = [
        "",
        "## Gain over the untrained control",
        "",
        "Each objective's figure less its untrained control's (the same architecture freshly initialised, scored or "
        "fine-tuned the same way; `downstream.control=scratch`), pooled over the pre-training seeds, with its 95% "
        "interval: zero-shot by the two-way bootstrap over (seed, item), fine-tuned by t over the seeds. * the "
        "interval leaves out 0.",
        "",
    ]
    header = ["budget", "objective", *(f"{t} {FIGURE_WORDS.get(f, f)}" for t, f in columns)]
    lines += ["| " + " | ".join(header) + " |", "| --- | --- |" + " ---: |" * len(columns)]
    for budget, by_objective in gains.items():
        for name, tasks in by_objective.items():
            cells = [str(tasks.get(t, {}).get(f, "—")) for t, f in columns]
            lines.append("| " + " | ".join([budget, name, *cells]) + " |")
    lines += ["", *(f"- {sentence}" for sentence in gain_verdicts(gains).values())]
    return lines


def weights_rule(weights: str) -> str:
    """Which weights every final run's tasks score (downstream.weights), in words."""
    if weights == "best":
        return "best weights by validation loss (RUN/best, `downstream.weights=best`)"
    return "last weights (the final model, `downstream.weights=last`)"


def study_markdown(
    plan: StudyPlan,
    searches: dict[str, Search],
    summaries: dict[str, list[dict]],
    ranking: Ranking,
    gains: GainTable,
    caveat: str = "",
) -> str:
    """study.md: the plan, the objectives at each budget (mean ± std over seeds, ranked at each) with `caveat` under
    them (that the ranked task does not measure pre-training), the gains over the untrained controls by budget with
    their verdicts, each search's trials, the ranked runs of the largest budget."""
    space = ", ".join(f"`{k}={v}`" for k, v in plan.space.items())
    steps = ", ".join(f"{k} {v}" for k, v in plan.search_steps.items())
    several = len(plan.budgets) > 1
    at = f"each of the budgets {', '.join(plan.budgets)}" if several else f"`trainer.budget={plan.budget}`"
    share = " (study.search_fraction of the largest budget; its recipe trains at every budget)" if several else ""
    lines = [
        f"# Study {plan.directory.name}",
        "",
        f"Objectives {', '.join(plan.objectives)} at {at} per run, seeds {', '.join(map(str, plan.seeds))}. Each "
        f"objective's learning rate was searched with {plan.trials} trials (optuna, {plan.sampler} sampler, seed "
        f"{plan.search_seed}) at `trainer.budget={plan.search_budget}`{share} (about {steps} steps) over {space}, by "
        "its own final val_loss.",
        f"Run keys of every run: `{' '.join(plan.run_overrides) or '(defaults)'}`.",
        f"One rule for every objective: the tasks score each run's {weights_rule(plan.weights)}.",
        "",
        "## Objectives",
        "",
        f"Best first at each budget, {ranking.header}."
        if ranking.key
        else "Not ordered: the runs share no comparable figure.",
        "",
        *([caveat, ""] if caveat else []),
    ]
    rows = [row for budget_rows in summaries.values() for row in budget_rows]
    figures = sorted({k for s in rows for k in s["downstream"]})
    header = ["objective", *(["budget"] if several else []), "chosen recipe", "seeds", "val_loss (own objective)",
              *figures, "epochs"]  # fmt: skip
    lines += ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for s in rows:
        cells = [s["objective"], *([s["budget"]] if several else []), recipe_text(s["recipe"])]
        cells += [str(s["seeds_completed"]), _cell(*s["val_loss"])]
        cells += [_cell(*s["downstream"].get(k, (None, None))) for k in figures]
        cells.append(f"{s['epochs']:.2f}" if s["epochs"] is not None else "—")
        lines.append("| " + " | ".join(cells) + " |")
    lines += gains_markdown(gains)
    lines += ["", "## Searches", ""]
    for name in plan.objectives:
        search = searches.get(name)
        if search is None:
            continue
        best = search.chosen()
        lines += [
            f"### {name}",
            "",
            "| trial | recipe | status | steps | val_loss |",
            "| --- | --- | --- | ---: | ---: |",
        ]
        for i, t in enumerate(search.trials):
            recipe = recipe_text(t.recipe)
            mark = " (chosen)" if t is best else ""
            loss = f"{t.val_loss:.4f}" if t.val_loss is not None else "—"
            lines.append(f"| {i} | {recipe}{mark} | {t.status} | {t.steps if t.steps is not None else '—'} | {loss} |")
        lines.append("")
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
    ranked = plan.directory / f"{RANKING}.md"
    if ranked.exists():
        lines += ["## Final runs", "", ranked.read_text().strip(), ""]
    return "\n".join(lines) + "\n"
