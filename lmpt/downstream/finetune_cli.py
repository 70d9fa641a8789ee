"""`lmpt-finetune RUN data.train=... data.dev=... [data.test=...]` or `lmpt-finetune RUN task=bundled:NAME`: fine-tune
a pre-trained run on a labelled task (lmpt.downstream.finetuning.finetune), print the figures as tables under a title
that says the mode and what it trains (or one JSON object with json=true) and keep them as a hand run's record: the
run's model per seed, the recipe its search chose, and with control=scratch the model against its scratch control, the
bag-of-words floor and the majority class, with the gain and its interval. The record of a hand run goes beside the
run's own records, in RUN/downstream/hand/TASK-TIME.json (lmpt.downstream.codec), never over them."""

from __future__ import annotations

import json
from pathlib import Path

from rich.table import Table

from lmpt.config.command_options import parse_command, run_command
from lmpt.console import console
from lmpt.downstream.codec import hand_record_path, write_record
from lmpt.downstream.figures import (
    ACCURACY,
    BAG_OF_WORDS,
    GAIN,
    MAJORITY_ACCURACY,
    MEAN_BASELINE_MSE,
    SCRATCH,
    mean_of,
    std_of,
)
from lmpt.downstream.figures import SEED_FIGURES as FIGURES
from lmpt.downstream.finetuning.finetune import check_settings, finetune
from lmpt.downstream.glue_cli import glue_run, is_glue, render_glue
from lmpt.downstream.kinds.classification import Classification
from lmpt.downstream.kinds.regression import Regression
from lmpt.downstream.significance import describe_gain
from lmpt.downstream.tasks.labelled_task import task_name
from lmpt.downstream.tasks.options import MODE_MEANINGS, FinetuneOptions
from lmpt.downstream.tasks.task_files import with_task_files
from lmpt.rundir.trained import RUN_ARGUMENT, load_trained, locate_weights
from lmpt.train.placement import take_threads

PROG = "lmpt-finetune"
SUMMARY = (
    "Fine-tune a pre-trained run (any objective and architecture) on a labelled classification task (data.* files, "
    "or task=bundled:NAME for one lmpt ships), once per seed, as a linear probe (mode=probe, the default, as "
    "downstream.mode's) or every weight trained (mode=full), and report accuracy, macro-F1 and (two classes) "
    "Matthews correlation on dev and test as mean ± sample std over seeds, with the per-seed figures. The learning "
    "rate (and an encoder's pooling) is searched on a slice of the training split; the same architecture freshly "
    "initialised is fine-tuned beside it as a control, with a bag-of-words floor and the gain's paired 95% interval. "
    "The record is kept beside the run's own, in RUN/downstream/hand/TASK-TIME.json (never over "
    "RUN/downstream/TASK.json, the run's own scoring's)."
)
POSITIONALS = [RUN_ARGUMENT]
BASELINES = {MAJORITY_ACCURACY: "majority class", MEAN_BASELINE_MSE: "mean prediction"}
"""The trivial baseline's figure of a record, and its row's name: a classification's, or a regression's."""


def _cell(mean: float, std: float | None) -> str:
    return f"{mean:.4f}" if std is None else f"{mean:.4f} ± {std:.4f}"


def render(result: dict) -> None:
    """The figures as a rich table: one row per figure, mean ± std then each seed."""
    mode = result["mode"]
    title = (
        f"{PROG} {result['task']}: {result['objective']} {result['arch']}, mode={mode} ({MODE_MEANINGS[mode]}), "
        f"pooling {result['pooling']}, {result['seeds']} seed(s) x {result['steps']} steps"
    )
    table = Table(title=title, title_justify="left")
    table.add_column("figure")
    table.add_column("mean ± std", justify="right")
    for run in result["per_seed"]:
        table.add_column(f"seed {run['seed']}", justify="right")
    for prefix, split in (("", "dev"), ("test_", "test")):
        for figure in FIGURES:
            key = prefix + figure
            if f"{key}_mean" in result:
                seeds = [f"{run[key]:.4f}" for run in result["per_seed"]]
                table.add_row(f"{split} {figure}", _cell(result[f"{key}_mean"], result[f"{key}_std"]), *seeds)
    table.add_row("train loss", "", *(f"{run['train_loss']:.4f}" for run in result["per_seed"]))
    console.print(table)
    baseline = (
        f"dev mean-prediction MSE {result[MEAN_BASELINE_MSE]:.4f}"
        if MEAN_BASELINE_MSE in result
        else f"classes {result['classes']} · dev majority-class accuracy {result[MAJORITY_ACCURACY]:.4f}"
    )
    console.print(
        f"{baseline} · {result['train_examples']:,} train / {result['dev_examples']:,} dev examples · "
        f"{result['precision']} · record {result['record']} (a hand run: the run's own records in RUN/downstream/ "
        "are left as they are)"
    )
    if "search" in result:
        console.print(describe_search("pre-trained", result))
    if result.get("control") == SCRATCH:
        render_control(result)


def describe_search(name: str, tuned: dict) -> str:
    """One line: the recipe a search chose and every candidate's accuracy on the held-back slice."""
    search = tuned["search"]
    figure = str(search.get("picked_by", ACCURACY)).split()[0]  # the figure the search picked by
    tried = ", ".join(f"{c['lr']:g}/{c['pooling']} {c[figure]:.3f}" for c in search["candidates"])
    return (
        f"{name} recipe searched on {search['held_out']} examples held back from train (never dev), "
        f"{search['steps']} steps per candidate: lr {tuned['lr']:g}, pooling {tuned['pooling']} (lr/pooling "
        f"{figure}: {tried})"
    )


def render_control(result: dict) -> None:
    """The run's model against its scratch control, the bag-of-words floor and the trivial baseline (the majority
    class; a regression's mean prediction), then the gain in the figure it is of (accuracy; a regression's MSE)."""
    scratch, bow, gains = result[SCRATCH], result[BAG_OF_WORDS], result[GAIN]
    splits = ["", "test_"] if "test_examples" in result else [""]
    figure = next(iter(gains))  # the dev figure the gain is of: accuracy, or a regression's mse
    table = Table(title=f"{result['task']}: against the controls", title_justify="left")
    table.add_column("model")
    for prefix in splits:
        table.add_column(f"{prefix.rstrip('_') or 'dev'} {figure}", justify="right")
    table.add_column("recipe")

    def row(name: str, tuned: dict) -> None:
        cells = [_cell(tuned[mean_of(p + figure)], tuned[std_of(p + figure)]) for p in splits]
        table.add_row(name, *cells, f"lr {tuned['lr']:g}, {tuned['pooling']}")

    row(f"pre-trained {result['objective']}", result)
    row(f"scratch {result['arch']}", scratch)
    table.add_row("bag of words", *(f"{bow[p + figure]:.4f}" for p in splits), bow["method"])
    baseline, value = next((name, result[k]) for k, name in BASELINES.items() if k in result)
    table.add_row(baseline, f"{value:.4f}", *[""] * (len(splits) - 1), "")
    intervals = [gains[p + figure] for p in splits]
    verdicts = ", ".join("significant" if g["significant"] else "not significant" for g in intervals)
    shown = [f"{g['gain']:+.4f} [{g['interval'][0]:+.3f}, {g['interval'][1]:+.3f}]" for g in intervals]
    table.add_row("gain [95%]", *shown, verdicts)
    console.print(table)
    if scratch.get("shared"):
        console.print(
            "scratch control: read back, not fine-tuned again: an earlier run fine-tuned the same fresh weights on "
            "the same tokens with the same recipe (one control per architecture and size)"
        )
    if "search" in scratch:
        console.print(describe_search("scratch", scratch))
    for prefix in splits:
        console.print(describe_gain(f"{prefix.rstrip('_') or 'dev'} {figure}:", gains[prefix + figure]))


def finetune_run(run: str | Path, o: FinetuneOptions) -> dict:
    """Load RUN (a run directory or checkpoint), fine-tune it (lmpt.downstream.finetuning.finetune) and keep the
    figures as a hand run's record, RUN/downstream/hand/TASK-TIME.json (the run directory a checkpoint belongs to;
    never the run's own RUN/downstream/TASK.json); the dict, with `record` its path."""
    check_settings(o)
    run_dir = locate_weights(run).run_dir
    named_by = None if o.task else f"data.train={o.data.train}"
    path = hand_record_path(run_dir, task_name(o), named_by)  # a bad task name is refused before any work
    kind = Regression if o.regression else Classification
    take_threads()  # its slot's threads, else the cores free of other work (lmpt.train.placement)
    result = kind.stamped(finetune(load_trained(run, o.device), o, kind.target()))
    write_record(path, {**result, "record": str(path)})
    return {**result, "record": str(path)}


def finetune_command(argv: list[str]) -> None:
    (run,), o = parse_command(argv, PROG, SUMMARY, POSITIONALS, FinetuneOptions)
    glue = is_glue(o.task)
    result = glue_run(run, o) if glue else finetune_run(run, with_task_files(o))
    if o.json:
        print(json.dumps(result))
    else:
        (render_glue if glue else render)(result)


def main() -> None:
    run_command(finetune_command)


if __name__ == "__main__":
    main()
