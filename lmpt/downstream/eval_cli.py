"""The `lmpt-eval` command: a trained run scored on text (`data=`, lmpt.inference.evaluate) or on a
multiple-choice or minimal-pair task zero-shot (`task=`, lmpt.downstream.zero_shot)."""

from __future__ import annotations

import json

from lmpt.config.choices import CONTROLS
from lmpt.config.command_options import parse_command, require, run_command
from lmpt.downstream.choice_tasks import task_name
from lmpt.downstream.multiple_choice import CHOICE_PLL
from lmpt.downstream.zero_shot import read_zero_shot, render_zero_shot
from lmpt.downstream.zero_shot_control import score_zero_shot
from lmpt.inference.evaluate import POSITIONALS, PROG, SUMMARY, EvalOptions, evaluate_text, render
from lmpt.rundir.trained import load_trained, require_token_head


def evaluate(argv: list[str]) -> None:
    (run,), o = parse_command(argv, PROG, SUMMARY, POSITIONALS, EvalOptions)
    require((o.data is None) != (o.task is None), f"{PROG} needs data=TEXT or task=FILE.jsonl, not both")
    require(o.choice_pll in CHOICE_PLL, f"choice_pll={o.choice_pll} is unknown: use {' or '.join(CHOICE_PLL)}")
    require(o.control in CONTROLS, f"control={o.control} is unknown: use {' or '.join(CONTROLS)}")
    require(o.control == "none" or o.task is not None, f"control={o.control} needs task=: text has no control")
    task = read_zero_shot(o.task) if o.task is not None else None
    trained = load_trained(run, o.device)
    require_token_head(trained, PROG)
    if task is not None:
        require(o.batch_size >= 1, f"batch_size={o.batch_size} must be at least 1")
        scored = score_zero_shot(trained, task, o.batch_size, o.json, o.control, o.within_word, o.choice_pll)
        result = {"task": task_name(o.task), **scored}
    else:
        result = evaluate_text(trained, o)
    if o.json:
        print(json.dumps(result))
    else:
        (render_zero_shot if task is not None else render)(result)


def main() -> None:
    run_command(evaluate)


if __name__ == "__main__":
    main()
