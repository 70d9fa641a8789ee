"""One door to the zero-shot tasks (`lmpt-eval RUN task=...`, `downstream.choice_tasks`): a task file's kind is found by
the registry (lmpt.downstream.kinds.registry), which reads, checks, scores, renders and picks the logged figures of its
own tasks; with control=scratch the same task is scored on the run's untrained twin beside it
(lmpt.downstream.kinds.zero_shot).

A zero-shot task beside its untrained control (`downstream.control=scratch`, `lmpt-eval ... control=scratch`): the same
items scored the same way by the run's architecture freshly initialised (lmpt.downstream.control), and the run's gain
over it with a 95% interval paired over items (lmpt.downstream.significance). A zero-shot figure alone cannot say what
pre-training gave: an untrained model already prefers one sentence of a minimal pair by its tokens. On minimal pairs the
gain is also given on the pairs of equal token length, where the length preference any language model learns first
cannot help. The scoring of both lives with the zero-shot door (lmpt.downstream.kinds.zero_shot)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np

from lmpt.downstream.figures import (
    ACCURACY,
    ACCURACY_GAIN,
    EQUAL_LENGTH_ACCURACY,
    EQUAL_LENGTH_PAIRS,
    GAIN,
    SCRATCH,
    SCRATCH_ACCURACY,
)
from lmpt.downstream.kinds.base import ZeroShotKind, ZeroShotTask
from lmpt.downstream.kinds.registry import kind_of, record_kind, zero_shot_kind
from lmpt.downstream.significance import decode_outcomes, items_key, paired_gain
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
    from lmpt.downstream.kinds.zero_shot import zero_shot_gains

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
        from lmpt.downstream.kinds.zero_shot import render_control

        render_control(result)


def logged_zero_shot(result: dict) -> dict[str, float]:
    """The figures of the result that go into metrics.jsonl as `downstream/TASK/FIGURE`, with its untrained
    control's accuracy and the gain over it when it had one."""
    figures = result_kind(result).logged(result)
    if GAIN in result:
        figures |= {SCRATCH_ACCURACY: result[SCRATCH][ACCURACY], ACCURACY_GAIN: result[GAIN][ACCURACY]["gain"]}
    return figures


def figure_gain(correct: np.ndarray, control: np.ndarray) -> dict:
    """The gain of `correct` over `control` ([seeds, items] booleans) with its paired interval, beside both means."""
    return {"pretrained": float(np.mean(correct)), SCRATCH: float(np.mean(control)), **paired_gain(correct, control)}


def zero_shot_gains(result: dict, control: dict) -> dict[str, dict]:
    """By figure, the gain of a run's zero-shot `result` over its `control`'s on the same items: accuracy, and on
    minimal pairs accuracy on the pairs of equal token length (when there are any)."""
    correct, scratch = decode_outcomes(result[items_key(ACCURACY)]), decode_outcomes(control[items_key(ACCURACY)])
    assert correct is not None and scratch is not None and correct.shape == scratch.shape
    gains = {ACCURACY: figure_gain(correct[None], scratch[None])}
    equal = decode_outcomes(result.get(EQUAL_LENGTH_PAIRS))
    if equal is not None and equal.any():
        gains[EQUAL_LENGTH_ACCURACY] = figure_gain(correct[None, equal], scratch[None, equal])
    return gains


def render_control(result: dict) -> None:
    """The gain of the run's model over its untrained control, per figure, in plain sentences."""
    from lmpt.console import console
    from lmpt.downstream.significance import describe_gain

    names = {ACCURACY: "accuracy", EQUAL_LENGTH_ACCURACY: "accuracy on pairs of equal token length"}
    for figure, gain in result[GAIN].items():
        console.print(f"{describe_gain(names.get(figure, figure) + ':', gain)} (untrained {gain[SCRATCH]:.4f})")
