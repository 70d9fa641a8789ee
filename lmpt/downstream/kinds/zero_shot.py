"""One door to the zero-shot tasks (`lmpt-eval RUN task=...`, `downstream.choice_tasks`): a task file's kind is found
by the registry (lmpt.downstream.kinds.registry), which reads, checks, scores, renders and picks the logged figures
of its own tasks; with control=scratch the same task is scored on the run's untrained twin beside it
(lmpt.downstream.zero_shot.control_gain)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from lmpt.downstream.figures import ACCURACY, ACCURACY_GAIN, EQUAL_LENGTH_ACCURACY, GAIN, SCRATCH, SCRATCH_ACCURACY
from lmpt.downstream.kinds.base import ZeroShotKind, ZeroShotTask
from lmpt.downstream.kinds.registry import kind_of, record_kind, zero_shot_kind
from lmpt.downstream.significance import items_key
from lmpt.errors import LmptError
from lmpt.objectives.base import Reading

if TYPE_CHECKING:
    from lmpt.downstream.zero_shot.multiple_choice import Framing
    from lmpt.rundir.trained import Trained


def read_zero_shot(task: str) -> ZeroShotTask:
    """Every record of the task `task` names (a path or bundled:NAME), read by its kind."""
    return zero_shot_kind(task).read(task)


def check_zero_shot_fits(run: Framing, task: ZeroShotTask) -> None:
    """Refuse now what scoring `task` with `run` would refuse: a choice, or a minimal pair's sentence, too long for
    the model (multiple_choice.framed_choices). Encoders and own scorers cut every text to fit and refuse none."""
    from lmpt.downstream.zero_shot.multiple_choice import framed_choices  # torch-heavy: when a task is named

    if run.objective.reading(run.arch) in (Reading.CAUSAL, Reading.ENCODER_DECODER):  # the others cut to fit
        framed_choices(run, kind_of(task).as_questions(task))


def evaluate_zero_shot(
    trained: Trained,
    task: ZeroShotTask,
    batch_size: int,
    hidden: bool,
    within_word: bool = False,
    choice_pll: str = "conditional",
) -> dict:
    """The figures of the task (without its name); `within_word`: encoders' PLL-word-l2r on minimal pairs;
    `choice_pll`: how encoders score a multiple-choice choice (multiple_choice.CHOICE_PLL)."""
    return kind_of(task).evaluate(trained, task, batch_size, hidden, within_word, choice_pll)


def score_zero_shot(
    trained: Trained,
    task: ZeroShotTask,
    batch_size: int,
    hidden: bool,
    control: str,
    within_word: bool = False,
    choice_pll: str = "conditional",
) -> dict:
    """The task scored on `trained` (`evaluate_zero_shot`) and, with `control` scratch, on its untrained control the
    same way: then the control's figures (`scratch`: its accuracy and per-item outcomes) and the gains over it
    (`gain`) join the result, stamped with its kind (`TaskKind.stamped`)."""
    from lmpt.downstream.control import scratch_twin  # torch-heavy: when scoring only
    from lmpt.downstream.zero_shot.control_gain import zero_shot_gains

    result = evaluate_zero_shot(trained, task, batch_size, hidden, within_word, choice_pll)
    if control != SCRATCH:
        return kind_of(task).stamped(result)
    named = dataclasses.replace(task, name=f"{task.name} (scratch control)")
    scratch = evaluate_zero_shot(scratch_twin(trained), named, batch_size, hidden, within_word, choice_pll)
    kept = {k: scratch[k] for k in (ACCURACY, EQUAL_LENGTH_ACCURACY, items_key(ACCURACY)) if k in scratch}
    init_seed = int(trained.config.trainer.seed)
    return kind_of(task).stamped(
        {
            **result,
            "control": SCRATCH,
            SCRATCH: {"init_seed": init_seed, **kept},
            GAIN: zero_shot_gains(result, scratch),
        }
    )


def result_kind(result: dict) -> type[ZeroShotKind]:
    """The zero-shot kind whose scoring gave `result` (a record read back as well as one just scored)."""
    kind = record_kind(result)
    if kind is None or not issubclass(kind, ZeroShotKind):
        raise LmptError(f"a zero-shot result of task {result.get('task', '?')} that no zero-shot kind wrote")
    return kind


def render_zero_shot(result: dict) -> None:
    """The result as rich tables on the console, then its gain over the control when it had one."""
    result_kind(result).render(result)
    if GAIN in result:
        from lmpt.downstream.zero_shot.control_gain import render_control

        render_control(result)


def logged_zero_shot(result: dict) -> dict[str, float]:
    """The figures of the result that go into metrics.jsonl as `downstream/TASK/FIGURE`, with its untrained
    control's accuracy and the gain over it when it had one."""
    figures = result_kind(result).logged(result)
    if GAIN in result:
        figures |= {SCRATCH_ACCURACY: result[SCRATCH][ACCURACY], ACCURACY_GAIN: result[GAIN][ACCURACY]["gain"]}
    return figures
