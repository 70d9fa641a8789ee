"""`lmpt-finetune RUN data.train=... data.dev=... [data.test=...]`: fine-tune a pre-trained run on a labelled task
(lmpt.downstream.finetune), print the figures as a table (or one JSON object with json=true) and keep them in
RUN/downstream/TASK.json."""

from __future__ import annotations

import json

from rich.table import Table

from lmpt.config.command_options import parse_command, run_command
from lmpt.console import console
from lmpt.downstream.finetune import finetune_run
from lmpt.downstream.options import FinetuneOptions
from lmpt.downstream.scores import FIGURES
from lmpt.rundir.trained import RUN_ARGUMENT

PROG = "lmpt-finetune"
SUMMARY = (
    "Fine-tune a pre-trained run (any objective and architecture) on a labelled classification task, once per seed, "
    "and report accuracy, macro-F1 and (two classes) Matthews correlation on dev and test as mean ± sample std over "
    "seeds, with the per-seed figures; the record is kept in RUN/downstream/TASK.json."
)
POSITIONALS = [RUN_ARGUMENT]


def _cell(mean: float, std: float | None) -> str:
    return f"{mean:.4f}" if std is None else f"{mean:.4f} ± {std:.4f}"


def render(result: dict) -> None:
    """The figures as a rich table: one row per figure, mean ± std then each seed."""
    title = (
        f"lmpt-finetune {result['task']}: {result['objective']} {result['arch']}, {result['mode']}, pooling "
        f"{result['pooling']}, {result['seeds']} seed(s) x {result['steps']} steps"
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
    console.print(
        f"classes {result['classes']} · dev majority-class accuracy {result['majority_accuracy']:.4f} · "
        f"{result['train_examples']:,} train / {result['dev_examples']:,} dev examples · {result['precision']} · "
        f"record {result['record']}"
    )


def finetune_command(argv: list[str]) -> None:
    (run,), o = parse_command(argv, PROG, SUMMARY, POSITIONALS, FinetuneOptions)
    result = finetune_run(run, o)
    if o.json:
        print(json.dumps(result))
    else:
        render(result)


def main() -> None:
    run_command(finetune_command)


if __name__ == "__main__":
    main()
