"""Multiple choice, a zero-shot kind: `{"context", "choices", "label"}` records (lmpt.downstream.zero_shot_files), each
choice scored by the model after its context (lmpt.downstream.likelihood); right when the gold choice scores highest."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from rich.table import Table

from lmpt.console import print_whole
from lmpt.downstream.figures import ACCURACY, ACCURACY_NORM, CHANCE, CHOICE_FIGURES
from lmpt.downstream.kinds.zero_shot import ZeroShotResult, ZeroShotTask
from lmpt.downstream.significance import high_key, low_key
from lmpt.downstream.zero_shot_files import ChoiceQuestion, read_choice_task

if TYPE_CHECKING:
    from lmpt.quality.decontamination import TaskItems
    from lmpt.rundir.trained import Trained


@dataclass(frozen=True)
class ChoiceResult(ZeroShotResult):
    kind: ClassVar[str] = "choice"

    @classmethod
    def wrote(cls, raw: dict[str, Any]) -> bool:
        return ACCURACY_NORM in raw  # what only a multiple-choice scoring reports

    def own_logged(self) -> dict[str, float]:
        return {k: self.record[k] for k in CHOICE_FIGURES}

    def render_figures(self) -> None:
        """The figures as a rich table, each with its 95% bootstrap interval."""
        result = self.record
        title = f"lmpt-eval task={result['task']}: {result['objective']} {result['arch']}"
        table = Table(title=title, title_justify="left")
        table.add_column("metric")
        table.add_column("value", justify="right")
        rows = [
            ("method", result["method"]),
            ("questions", f"{result['n']:,}"),
            (ACCURACY, _with_interval(result, ACCURACY)),
            (f"{ACCURACY_NORM} (per byte)", _with_interval(result, ACCURACY_NORM)),
            (CHANCE, f"{result[CHANCE]:.4f}"),
        ]
        for name, value in rows:
            table.add_row(name, value)
        print_whole(table)


def _with_interval(result: dict, figure: str) -> str:
    """`0.6120 [0.590, 0.634]`: the figure and its 95% bootstrap interval (when the result has one)."""
    if result.get(low_key(figure)) is None:
        return f"{result[figure]:.4f}"
    return f"{result[figure]:.4f} [{result[low_key(figure)]:.3f}, {result[high_key(figure)]:.3f}]"


@dataclass(frozen=True, kw_only=True)
class MultipleChoice(ZeroShotTask):
    kind: ClassVar[str] = "choice"
    listing_order: ClassVar[int] = 1
    result_type: ClassVar[type[ZeroShotResult]] = ChoiceResult
    fields: ClassVar[tuple[str, ...]] = ("context", "choices", "label")
    described: ClassVar[str] = 'multiple choice ({"context", "choices", "label"})'

    items: list[ChoiceQuestion]

    @classmethod
    def read_items(cls, spec: str) -> list[ChoiceQuestion]:
        return read_choice_task(spec)

    def as_questions(self) -> list[ChoiceQuestion]:
        return list(self.items)

    def texts(self) -> TaskItems:
        """Each question's context followed by its gold answer."""
        from lmpt.quality.decontamination import TaskItems

        return TaskItems(self.name, [f"{q.context} {q.choices[q.label]}" for q in self.items])

    def evaluate(self, trained: Trained) -> dict:
        from lmpt.downstream.likelihood import evaluate_choices  # torch-heavy: when scoring only

        how = self.how
        return evaluate_choices(trained, list(self.items), how.batch_size, how.hidden, self.name, how.choice_pll)
