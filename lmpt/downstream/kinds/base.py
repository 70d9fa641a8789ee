"""What every task kind answers (`TaskKind`), and the zero-shot task a multiple-choice or minimal-pair kind reads
(`ZeroShotTask`). A kind is one class in its own module of lmpt.downstream.kinds, found by the registry
(lmpt.downstream.kinds.registry): it says how its task is read, checked, scored and recorded, so no other module asks
a task or a record which kind it is by name. Nothing here imports torch: reports and `lmpt --help` read it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from lmpt.downstream.tasks.choice_tasks import ChoiceQuestion, MinimalPair
    from lmpt.quality.decontamination import TaskItems
    from lmpt.rundir.trained import Trained


@dataclass(frozen=True)
class ZeroShotTask:
    """The records of one zero-shot task: `questions` (multiple choice) or `pairs` (minimal pairs), not both."""

    questions: list[ChoiceQuestion] | None = None
    pairs: list[MinimalPair] | None = None
    name: str = ""
    """The task's short name (choice_tasks.task_name): what its progress bar says is being scored."""

    @property
    def items(self) -> Sequence[Any]:
        """The task's records, of whichever kind."""
        found = self.pairs if self.pairs is not None else self.questions
        assert found is not None
        return found

    def with_items(self, items: list[Any]) -> ZeroShotTask:
        """The same task holding `items` (records of its own kind) instead of its own."""
        return replace(self, pairs=items) if self.pairs is not None else replace(self, questions=items)


CHARS_PER_TOKEN = 4.0
"""Characters of English text per token, about what lmpt's BPE tokenizers give on WikiText-2 and BLiMP: a task's
scoring cost is estimated before any tokenizer exists (lmpt.downstream.cost)."""


@dataclass(frozen=True)
class ScoringRun:
    """What a task's scoring costs depend on (lmpt.downstream.cost builds it from the run's objective): how many rows
    a choice is read in, the run's windows and architecture, its downstream settings, and how many models are scored
    (the run's, and its untrained control)."""

    arch: str
    seq_len: int
    downstream: Any
    row_per_scored_token: bool = False
    """A pseudo-log-likelihood: a row per token of the choice, each of the whole row."""
    rows_per_choice: int = 1
    """Rows a choice is read in otherwise: 1 left to right, an own scorer's draws (mdlm)."""
    models: int = 1

    def tokens(self, text: str) -> int:
        return max(1, round(len(text) / CHARS_PER_TOKEN)) if text else 0

    def choice_tokens(self, context: str, choice: str) -> float:
        """Tokens through one model to score `choice` after `context` (its separator counted)."""
        row = self.tokens(context) + self.tokens(choice) + 1
        return float(row * ((self.tokens(choice) + 1) if self.row_per_scored_token else self.rows_per_choice))


RECORD_VERSION = 1
"""The version of the downstream records lmpt writes (`record_version`). Version 1 names the kind that wrote it
(`kind`); a record without one was written before, and its kind is read from its keys (`TaskKind.holds_record`)."""


class TaskKind:
    """A kind of downstream task. Subclasses set `name` and answer every question the rest of lmpt asks of a task
    or of its record; the registry lists each subclass that sets `name`."""

    name: ClassVar[str] = ""
    """The kind's name, as `task_kind` returns it."""
    listing_order: ClassVar[int] = 100
    record_precedence: ClassVar[int] = 0
    """Kinds whose records are told apart by more specific keys are asked first (lower first) which wrote a record:
    a regression's record holds per_seed, as a classification's does, and pearson_mean besides."""

    @classmethod
    def stamped(cls, result: dict) -> dict:
        """`result` as this kind's record: its `kind` and the `record_version` first."""
        return {"kind": cls.name, "record_version": RECORD_VERSION, **result}

    @classmethod
    def names_folder(cls, task: str) -> bool:
        """Whether `task` (a path or bundled:NAME) names a folder this kind reads (a zero-shot task is a file)."""
        return False

    @classmethod
    def holds_record(cls, raw: dict[str, Any]) -> bool:
        """Whether `raw`, a record read back from RUN/downstream/TASK.json, was written by this kind's scoring."""
        raise NotImplementedError

    @classmethod
    def record_intervals(cls, raw: dict[str, Any]) -> dict[str, tuple[float, float]]:
        """Intervals this kind's record keeps in a form of its own (beside FIGURE_low / FIGURE_high), by figure."""
        return {}

    @classmethod
    def decontamination_texts(cls, task: str, key: str) -> TaskItems:
        """The texts of `task` (as `key` names it) a quality stage decontaminates the training text against."""
        raise NotImplementedError

    @classmethod
    def scoring_tokens(cls, task: str, key: str, run: ScoringRun) -> float:
        """Tokens scoring `task` (as `key` names it) after training passes through one model of `run`, estimated
        before the run (lmpt.downstream.cost)."""
        raise NotImplementedError


class ZeroShotKind(TaskKind):
    """A kind scored zero-shot (downstream.choice_tasks, `lmpt-eval task=`): a JSON Lines file whose records hold
    `fields`, told apart from the other zero-shot kinds by its first record."""

    fields: ClassVar[tuple[str, ...]] = ()
    """The keys every record of the kind holds: what marks a file as this kind's."""
    described: ClassVar[str] = ""
    """The record's shape in words, for a message naming what a file may hold."""

    @classmethod
    def reads_record(cls, record: object) -> bool:
        """Whether a task file whose first record is `record` is of this kind."""
        return isinstance(record, dict) and set(cls.fields) <= set(record)

    @classmethod
    def owns(cls, task: ZeroShotTask) -> bool:
        """Whether `task` was read by this kind."""
        raise NotImplementedError

    @classmethod
    def read(cls, task: str) -> ZeroShotTask:
        """Every record of the task `task` names (a path or bundled:NAME); bad input is one LmptError."""
        raise NotImplementedError

    @classmethod
    def as_questions(cls, task: ZeroShotTask) -> list[ChoiceQuestion]:
        """The task as a decoder or encoder-decoder frames it: choices after a context (for the length check)."""
        raise NotImplementedError

    @classmethod
    def scoring_tokens(cls, task: str, key: str, run: ScoringRun) -> float:
        """Every choice of every record, read after its context as `run`'s objective reads one."""
        return sum(run.choice_tokens(q.context, c) for q in cls.as_questions(cls.read(task)) for c in q.choices)

    @classmethod
    def evaluate(
        cls, trained: Trained, task: ZeroShotTask, batch_size: int, hidden: bool, within_word: bool, choice_pll: str
    ) -> dict:
        """The figures of `task` scored on `trained`, with the method, under a progress bar unless `hidden`."""
        raise NotImplementedError

    @classmethod
    def logged(cls, result: dict) -> dict[str, float]:
        """The figures of a result that go into metrics.jsonl (before the control's)."""
        raise NotImplementedError

    @classmethod
    def render(cls, result: dict) -> None:
        """The result as rich tables on the console."""
        raise NotImplementedError
