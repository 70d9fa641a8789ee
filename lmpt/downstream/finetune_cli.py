"""`lmpt-finetune RUN data.train=... data.dev=... [data.test=...]` or `lmpt-finetune RUN task=bundled:NAME`: fine-tune
a pre-trained run on a labelled task (lmpt.downstream.finetune), print the figures as tables under a title
that says the mode and what it trains (or one JSON object with json=true) and keep them as a hand run's record: the
run's model per seed, the recipe its search chose, and with control=scratch the model against its scratch control, the
bag-of-words floor and the majority class, with the gain and its interval. The record of a hand run goes beside the
run's own records, in RUN/downstream/hand/TASK-TIME.json (lmpt.downstream.records), never over them."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from lmpt.config.command_options import parse_command, run_command
from lmpt.downstream.finetune import check_settings
from lmpt.downstream.glue_suite import GlueSuite, is_glue, render_glue
from lmpt.downstream.kinds.fine_tuned import FineTunedTask
from lmpt.downstream.kinds.fine_tuned_result import FineTunedResult
from lmpt.downstream.options import FinetuneOptions, labelled_name, with_task_files
from lmpt.downstream.records import hand_record_path, write_record
from lmpt.downstream.task import kinds
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


def given_task(o: FinetuneOptions) -> FineTunedTask:
    """The task lmpt-finetune's options name, as its kind reads it: regression=true the kind whose labels are numbers
    to predict, else the one of classes."""
    kind = next(k for k in kinds().values() if issubclass(k, FineTunedTask) and k.numbers == o.regression)
    return kind.given(o)


def finetune_run(run: str | Path, o: FinetuneOptions) -> FineTunedResult:
    """Load RUN (a run directory or checkpoint), fine-tune it (lmpt.downstream.finetune) and keep the
    figures as a hand run's record, RUN/downstream/hand/TASK-TIME.json (the run directory a checkpoint belongs to;
    never the run's own RUN/downstream/TASK.json); the result, its record's `record` its path."""
    check_settings(o)
    run_dir = locate_weights(run).run_dir
    named_by = None if o.task else f"data.train={o.data.train}"
    path = hand_record_path(run_dir, labelled_name(o), named_by)  # a bad task name is refused before any work
    task = given_task(o)
    take_threads()  # its slot's threads, else the cores free of other work (lmpt.train.placement)
    result = dataclasses.replace(task.score(load_trained(run, o.device)), record_file=str(path))
    write_record(path, result)
    return result


def finetune_command(argv: list[str]) -> None:
    (run,), o = parse_command(argv, PROG, SUMMARY, POSITIONALS, FinetuneOptions)
    if is_glue(o.task):
        record = GlueSuite.read(o).run(run)
        if o.json:
            print(json.dumps(record))
        else:
            render_glue(record)
        return
    result = finetune_run(run, with_task_files(o))
    if o.json:
        print(json.dumps(result.to_json()))
    else:
        result.render()


def main() -> None:
    run_command(finetune_command)


if __name__ == "__main__":
    main()
