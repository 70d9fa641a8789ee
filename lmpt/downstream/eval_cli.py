"""The `lmpt-eval` command: a trained run scored on text (`data=`, lmpt.inference.evaluate) or on a
multiple-choice task zero-shot (`task=`, lmpt.downstream.multiple_choice)."""

from __future__ import annotations

import json

from lmpt.config.command_options import parse_command, require, run_command
from lmpt.downstream.choice_tasks import read_choice_task, task_name
from lmpt.downstream.multiple_choice import evaluate_choices, render_choices
from lmpt.inference.evaluate import POSITIONALS, PROG, SUMMARY, EvalOptions, evaluate_text, render
from lmpt.rundir.trained import load_trained, require_token_head


def evaluate(argv: list[str]) -> None:
    (run,), o = parse_command(argv, PROG, SUMMARY, POSITIONALS, EvalOptions)
    require((o.data is None) != (o.task is None), f"{PROG} needs data=TEXT or task=FILE.jsonl, not both")
    questions = read_choice_task(o.task) if o.task is not None else None
    trained = load_trained(run, o.device)
    require_token_head(trained, PROG)
    if questions is not None:
        require(o.batch_size >= 1, f"batch_size={o.batch_size} must be at least 1")
        result = {"task": task_name(o.task), **evaluate_choices(trained, questions, o.batch_size, hidden=o.json)}
    else:
        result = evaluate_text(trained, o)
    if o.json:
        print(json.dumps(result))
    else:
        (render_choices if questions is not None else render)(result)


def main() -> None:
    run_command(evaluate)


if __name__ == "__main__":
    main()
