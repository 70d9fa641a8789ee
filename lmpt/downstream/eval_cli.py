"""The `lmpt-eval` command: a trained run scored on text (`data=`, lmpt.inference.evaluate) or on a multiple-choice
or minimal-pair task zero-shot (`task=`, read and scored by its kind: lmpt.downstream.task). A task's result is kept
as a hand run's record, RUN/downstream/hand/NAME-TIME.json (lmpt.downstream.records), beside the run's own records and
never over them."""

from __future__ import annotations

import json

from rich.markup import escape

from lmpt.config.command_options import parse_command, require, run_command
from lmpt.console import console
from lmpt.downstream.records import hand_record_path, write_record
from lmpt.downstream.task import Scoring, read_task
from lmpt.errors import LmptError
from lmpt.inference.evaluate import (
    POSITIONALS,
    PROG,
    SUMMARY,
    EvalOptions,
    evaluate_held_out,
    evaluate_text,
    render,
    render_held_out,
)
from lmpt.rundir.trained import load_trained, locate_weights, require_token_head
from lmpt.train.placement import take_threads

HELD_OUT_IGNORES = ("method", "seq_len", "stride", "batch_size", "seed", "documents", "text_field", "within_word")
"""Options of data= and task= that held_out=true has no use for: its windows, batches, draws and measure are the
run's own."""


def evaluate(argv: list[str]) -> None:
    (run,), o = parse_command(argv, PROG, SUMMARY, POSITIONALS, EvalOptions)
    given = [what for what, value in (("data=", o.data), ("task=", o.task), ("held_out=true", o.held_out)) if value]
    require(
        len(given) == 1, f"{PROG} needs data=TEXT, task=FILE.jsonl or held_out=true, one of them, not {given or 'none'}"
    )
    require(o.control == "none" or o.task is not None, f"control={o.control} needs task=: text has no control")
    require(
        o.held_out or not o.allow_changed_text,
        "allow_changed_text=true applies to held_out=true (the run's own text): data= and task= read the text given",
    )
    if o.held_out:
        unused = [f"{name}=" for name in HELD_OUT_IGNORES if getattr(o, name) != getattr(EvalOptions(), name)]
        require(
            not unused,
            f"held_out=true measures the run's validation windows as its training made them: {', '.join(unused)} "
            f"{'does' if len(unused) == 1 else 'do'} not apply there (drop it, or give data=TEXT to measure text your "
            "way)",
        )
    how = Scoring(
        batch_size=o.batch_size, control=o.control, hidden=o.json, within_word=o.within_word, choice_pll=o.choice_pll
    )
    task = read_task(o.task, how=how, zero_shot=True) if o.task is not None else None
    take_threads()  # its slot's threads, else the cores free of other work (lmpt.train.placement)
    trained = load_trained(run, o.device)
    require_token_head(trained, PROG)
    if o.held_out:
        result = evaluate_held_out(trained, o.allow_changed_text)
        if o.json:
            print(json.dumps(result))
        else:
            render_held_out(result)
        return
    if task is not None and o.task is not None:  # a task read is a task named
        require(o.batch_size >= 1, f"batch_size={o.batch_size} must be at least 1")
        scored = task.score(trained).with_keys(first={"task": task.name})
        kept = _keep_hand_record(run, scored.to_json())
        if o.json:
            print(json.dumps(scored.to_json()))
            return
        scored.render()
        console.print(f"record {escape(kept)}")
        return
    result = evaluate_text(trained, o)
    if o.json:
        print(json.dumps(result))
    else:
        render(result)


def _keep_hand_record(run: str, result: dict) -> str:
    """`result` kept as a hand run's record beside the run's own (lmpt.downstream.records.hand_record_path); where it
    went, or why it was not kept (a name that cannot be a file, a run directory that cannot be written): scoring a
    task never fails for want of a record."""
    try:
        path = hand_record_path(locate_weights(run).run_dir, result["task"])
        write_record(path, {**result, "record": str(path)})
    except (LmptError, OSError) as exc:
        return f"not kept: {exc}"
    return f"{path} (a hand run: the run's own records in RUN/downstream/ are left as they are)"


def main() -> None:
    run_command(evaluate)


if __name__ == "__main__":
    main()
