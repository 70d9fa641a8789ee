"""One door to the zero-shot tasks (`lmpt-eval RUN task=...`, `downstream.choice_tasks`): a task file holds either
multiple-choice records (lmpt.downstream.multiple_choice) or minimal pairs (lmpt.downstream.minimal_pairs), told
apart by its first record (lmpt.downstream.pair_tasks.task_kind); this module reads, scores, renders and picks the
logged figures of either."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from lmpt.downstream.choice_tasks import ChoiceQuestion, read_choice_task, task_name
from lmpt.downstream.figures import (
    ACCURACY,
    ACCURACY_GAIN,
    CHOICE_FIGURES,
    EQUAL_LENGTH_ACCURACY,
    GAIN,
    SCRATCH,
    SCRATCH_ACCURACY,
)
from lmpt.downstream.pair_tasks import MinimalPair, read_pairs, task_kind
from lmpt.rundir.trained import Trained

if TYPE_CHECKING:
    from lmpt.downstream.multiple_choice import Framing


@dataclass(frozen=True)
class ZeroShotTask:
    """The records of one zero-shot task: `questions` (multiple choice) or `pairs` (minimal pairs), not both."""

    questions: list[ChoiceQuestion] | None = None
    pairs: list[MinimalPair] | None = None
    name: str = ""
    """The task's short name (choice_tasks.task_name): what its progress bar says is being scored."""


def read_zero_shot(task: str) -> ZeroShotTask:
    """Every record of the task `task` names (a path or bundled:NAME), in whichever of the two formats it is."""
    if task_kind(task) == "pairs":
        return ZeroShotTask(pairs=read_pairs(task), name=task_name(task))
    return ZeroShotTask(questions=read_choice_task(task), name=task_name(task))


def check_zero_shot_fits(run: Framing, task: ZeroShotTask) -> None:
    """Refuse now what scoring `task` with `run` would refuse: a choice, or a minimal pair's sentence, too long for
    the model (multiple_choice.framed_choices). Encoders cut every text to fit the model and refuse none."""
    from lmpt.downstream.minimal_pairs import pair_questions  # torch-heavy: when a task is named
    from lmpt.downstream.multiple_choice import framed_choices

    if run.arch != "encoder":
        framed_choices(run, task.questions if task.questions is not None else pair_questions(task.pairs or []))


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
    from lmpt.downstream.minimal_pairs import evaluate_pairs  # torch-heavy: when scoring only
    from lmpt.downstream.multiple_choice import evaluate_choices

    if task.pairs is not None:
        return evaluate_pairs(trained, task.pairs, batch_size, hidden, within_word, task.name)
    assert task.questions is not None
    return evaluate_choices(trained, task.questions, batch_size, hidden, task.name, choice_pll)


def is_pairs_result(result: dict) -> bool:
    """Whether `result` came from a minimal-pair task."""
    return "paradigms" in result


def render_zero_shot(result: dict) -> None:
    """The result as rich tables on the console."""
    from lmpt.downstream.minimal_pairs import render_pairs
    from lmpt.downstream.multiple_choice import render_choices

    (render_pairs if is_pairs_result(result) else render_choices)(result)
    if GAIN in result:
        render_control(result)


def render_control(result: dict) -> None:
    """The gain of the run's model over its untrained control, per figure, in plain sentences."""
    from lmpt.console import console
    from lmpt.downstream.gain import describe_gain

    names = {ACCURACY: "accuracy", EQUAL_LENGTH_ACCURACY: "accuracy on pairs of equal token length"}
    for figure, gain in result[GAIN].items():
        console.print(f"{describe_gain(names.get(figure, figure) + ':', gain)} (untrained {gain[SCRATCH]:.4f})")


def logged_zero_shot(result: dict) -> dict[str, float]:
    """The figures of the result that go into metrics.jsonl as `downstream/TASK/FIGURE`, with its untrained
    control's accuracy and the gain over it when it had one (lmpt.downstream.zero_shot_control)."""
    from lmpt.downstream.minimal_pairs import logged_figures

    figures = logged_figures(result) if is_pairs_result(result) else {k: result[k] for k in CHOICE_FIGURES}
    if GAIN in result:
        figures |= {SCRATCH_ACCURACY: result[SCRATCH][ACCURACY], ACCURACY_GAIN: result[GAIN][ACCURACY]["gain"]}
    return figures
