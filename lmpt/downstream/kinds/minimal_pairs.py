"""Minimal pairs, a zero-shot kind (BLiMP's format): `{"sentence_good", "sentence_bad"}` records
(lmpt.downstream.tasks.choice_tasks), right when the acceptable sentence scores higher
(lmpt.downstream.zero_shot.minimal_pairs)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from lmpt.downstream.figures import ACCURACY
from lmpt.downstream.kinds.base import ZeroShotKind, ZeroShotTask
from lmpt.downstream.tasks.choice_tasks import PAIR_FIELDS, read_pairs, task_name

if TYPE_CHECKING:
    from lmpt.downstream.tasks.choice_tasks import ChoiceQuestion
    from lmpt.quality.decontamination import TaskItems
    from lmpt.rundir.trained import Trained


class MinimalPairs(ZeroShotKind):
    name: ClassVar[str] = "pairs"
    listing_order: ClassVar[int] = 0  # a file holding both shapes of record reads as pairs, as it always did
    fields: ClassVar[tuple[str, ...]] = PAIR_FIELDS
    described: ClassVar[str] = 'minimal pairs ({"sentence_good", "sentence_bad"}, optional "field" and "UID")'

    @classmethod
    def holds_record(cls, raw: dict[str, Any]) -> bool:
        return "paradigms" in raw  # what only a minimal-pair scoring reports

    @classmethod
    def record_intervals(cls, raw: dict[str, Any]) -> dict[str, tuple[float, float]]:
        """Accuracy's interval, kept as `interval: [low, high]`."""
        interval = raw.get("interval")
        if not isinstance(interval, list) or len(interval) < 2:
            return {}
        if all(isinstance(v, int | float) and not isinstance(v, bool) for v in interval[:2]):
            return {ACCURACY: (float(interval[0]), float(interval[1]))}
        return {}

    @classmethod
    def owns(cls, task: ZeroShotTask) -> bool:
        return task.pairs is not None

    @classmethod
    def read(cls, task: str) -> ZeroShotTask:
        return ZeroShotTask(pairs=read_pairs(task), name=task_name(task))

    @classmethod
    def as_questions(cls, task: ZeroShotTask) -> list[ChoiceQuestion]:
        """Each pair as two choices after an empty context, as decoders score it."""
        from lmpt.downstream.zero_shot.minimal_pairs import pair_questions  # torch-heavy: when a task is named

        return pair_questions(list(task.items))

    @classmethod
    def decontamination_texts(cls, task: str, key: str) -> TaskItems:
        """Each pair's acceptable sentence and its unacceptable twin, one text each."""
        from lmpt.quality.decontamination import TaskItems

        return TaskItems(task_name(task), [s for p in read_pairs(task) for s in (p.good, p.bad)])

    @classmethod
    def evaluate(
        cls, trained: Trained, task: ZeroShotTask, batch_size: int, hidden: bool, within_word: bool, choice_pll: str
    ) -> dict:
        from lmpt.downstream.zero_shot.minimal_pairs import evaluate_pairs  # torch-heavy: when scoring only

        return evaluate_pairs(trained, list(task.items), batch_size, hidden, within_word, task.name)

    @classmethod
    def logged(cls, result: dict) -> dict[str, float]:
        from lmpt.downstream.zero_shot.minimal_pairs import logged_figures

        return logged_figures(result)

    @classmethod
    def render(cls, result: dict) -> None:
        from lmpt.downstream.zero_shot.minimal_pairs import render_pairs

        render_pairs(result)
