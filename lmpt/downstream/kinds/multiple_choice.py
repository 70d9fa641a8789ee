"""Multiple choice, a zero-shot kind: `{"context", "choices", "label"}` records (lmpt.downstream.tasks.choice_tasks),
each choice scored by the model after its context (lmpt.downstream.zero_shot.multiple_choice)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from lmpt.downstream.figures import ACCURACY_NORM, CHOICE_FIGURES
from lmpt.downstream.kinds.base import ZeroShotKind, ZeroShotTask
from lmpt.downstream.tasks.choice_tasks import ChoiceQuestion, read_choice_task, task_name

if TYPE_CHECKING:
    from lmpt.quality.decontamination import TaskItems
    from lmpt.rundir.trained import Trained


class MultipleChoice(ZeroShotKind):
    name: ClassVar[str] = "choice"
    listing_order: ClassVar[int] = 1
    fields: ClassVar[tuple[str, ...]] = ("context", "choices", "label")
    described: ClassVar[str] = 'multiple choice ({"context", "choices", "label"})'

    @classmethod
    def holds_record(cls, raw: dict[str, Any]) -> bool:
        return ACCURACY_NORM in raw  # what only a multiple-choice scoring reports

    @classmethod
    def owns(cls, task: ZeroShotTask) -> bool:
        return task.questions is not None

    @classmethod
    def read(cls, task: str) -> ZeroShotTask:
        return ZeroShotTask(questions=read_choice_task(task), name=task_name(task))

    @classmethod
    def as_questions(cls, task: ZeroShotTask) -> list[ChoiceQuestion]:
        return list(task.items)

    @classmethod
    def decontamination_texts(cls, task: str, key: str) -> TaskItems:
        """Each question's context followed by its gold answer."""
        from lmpt.quality.decontamination import TaskItems

        questions = read_choice_task(task)
        return TaskItems(task_name(task), [f"{q.context} {q.choices[q.label]}" for q in questions])

    @classmethod
    def evaluate(
        cls, trained: Trained, task: ZeroShotTask, batch_size: int, hidden: bool, within_word: bool, choice_pll: str
    ) -> dict:
        from lmpt.downstream.zero_shot.multiple_choice import evaluate_choices  # torch-heavy: when scoring only

        return evaluate_choices(trained, list(task.items), batch_size, hidden, task.name, choice_pll)

    @classmethod
    def logged(cls, result: dict) -> dict[str, float]:
        return {k: result[k] for k in CHOICE_FIGURES}

    @classmethod
    def render(cls, result: dict) -> None:
        from lmpt.downstream.zero_shot.multiple_choice import render_choices

        render_choices(result)
