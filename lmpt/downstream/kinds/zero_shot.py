"""What the zero-shot kinds share (`ZeroShotTask`, `ZeroShotResult`): a JSON Lines file (a path or bundled:NAME) whose
records hold the kind's `fields`, told apart from the other zero-shot kinds by its first record, and scored by the
likelihood engine (lmpt.downstream.likelihood) through the run's own objective.

With control=scratch the same items are scored the same way by the run's architecture freshly initialised
(lmpt.downstream.control), and the run's gain over it comes with a 95% interval paired over items
(lmpt.downstream.significance). A zero-shot figure alone cannot say what pre-training gave: an untrained model already
prefers one sentence of a minimal pair by its tokens. On minimal pairs the gain is also given on the pairs of equal
token length, where the length preference any language model learns first cannot help."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from lmpt.downstream.bundled import task_name
from lmpt.downstream.figures import (
    ACCURACY,
    ACCURACY_GAIN,
    EQUAL_LENGTH_ACCURACY,
    EQUAL_LENGTH_PAIRS,
    GAIN,
    SCRATCH,
    SCRATCH_ACCURACY,
)
from lmpt.downstream.significance import decode_outcomes, describe_gain, items_key, paired_gain
from lmpt.downstream.task import DEFAULT_SCORING, RecordResult, RunShape, Scoring, ScoringRun, Task
from lmpt.objectives.base import Reading

if TYPE_CHECKING:
    from typing_extensions import Self

    from lmpt.downstream.zero_shot_files import ChoiceQuestion
    from lmpt.rundir.trained import Trained

SUBSET_SEED = 0
"""Seed of the draw of a fast subset's items (numpy's generator): fixed, so every run scores the same items."""


@dataclass(frozen=True, kw_only=True)
class ZeroShotTask(Task):
    """A task scored zero-shot: its items (records of its kind's shape), scored by the likelihood engine."""

    zero_shot: ClassVar[bool] = True
    result_type: ClassVar[type[ZeroShotResult]]
    fields: ClassVar[tuple[str, ...]] = ()
    """The keys every record of the kind holds: what marks a file as this kind's."""
    described: ClassVar[str] = ""
    """The record's shape in words, for a message naming what a file may hold."""

    items: Sequence[Any]

    @classmethod
    def reads_record(cls, record: object) -> bool:
        return isinstance(record, dict) and set(cls.fields) <= set(record)

    @classmethod
    def named(cls, spec: str, key: str = "task") -> str:
        return task_name(spec)

    @classmethod
    def read(cls, spec: str, key: str = "task", how: Scoring = DEFAULT_SCORING) -> Self:
        return cls(name=task_name(spec), key=key, how=how, items=cls.read_items(spec))

    @classmethod
    def read_items(cls, spec: str) -> list[Any]:
        """Every record of the file `spec` names (lmpt.downstream.zero_shot_files); bad input is one LmptError."""
        raise NotImplementedError

    def with_items(self, items: Sequence[Any]) -> Self:
        """The same task holding `items` (records of its own kind) instead of its own."""
        return dataclasses.replace(self, items=items)

    def subset(self, limit: int) -> Self:
        """At most `limit` of the task's items, drawn with SUBSET_SEED, kept in task order (a curve point's)."""
        if len(self.items) <= limit:
            return self
        kept = np.sort(np.random.default_rng(SUBSET_SEED).choice(len(self.items), size=limit, replace=False))
        return self.with_items([self.items[i] for i in kept])

    def as_questions(self) -> list[ChoiceQuestion]:
        """The task as a decoder or encoder-decoder frames it: choices after a context (for the length check)."""
        raise NotImplementedError

    def check(self, run: RunShape) -> None:
        """Once the run's tokenizer exists: refuse a choice, or a minimal pair's sentence, too long for the model
        (likelihood.framed_choices). Encoders and own scorers cut every text to fit and refuse none."""
        if run.tokenizer is None or run.objective is None:  # before the tokenizer: reading the task was the check
            return
        from lmpt.downstream.likelihood import RunFraming, framed_choices  # torch-heavy: when a task is named

        if run.objective.reading(run.arch) in (Reading.CAUSAL, Reading.ENCODER_DECODER):
            framed_choices(RunFraming(run.tokenizer, run.objective, run.arch, run.max_seq_len), self.as_questions())

    def scoring_tokens(self, run: ScoringRun) -> float:
        """Every choice of every record, read after its context as `run`'s objective reads one."""
        return sum(run.choice_tokens(q.context, c) for q in self.as_questions() for c in q.choices)

    def evaluate(self, trained: Trained) -> dict:
        """The figures of the task scored on `trained` (without its name or a control), with the method."""
        raise NotImplementedError

    def score(self, trained: Trained) -> ZeroShotResult:
        """The task scored on `trained` (`evaluate`) and, with control scratch, on its untrained control the same way:
        then the control's figures (`scratch`: its accuracy and per-item outcomes) and the gains over it (`gain`)
        join the result."""
        result = self.evaluate(trained)
        if self.how.control != SCRATCH:
            return self.result_type.of(result)
        from lmpt.downstream.control import scratch_twin  # torch-heavy: when scoring only

        named = dataclasses.replace(self, name=f"{self.name} (scratch control)")
        scratch = named.evaluate(scratch_twin(trained))
        kept = {k: scratch[k] for k in (ACCURACY, EQUAL_LENGTH_ACCURACY, items_key(ACCURACY)) if k in scratch}
        init_seed = int(trained.config.trainer.seed)
        control = {
            "control": SCRATCH,
            SCRATCH: {"init_seed": init_seed, **kept},
            GAIN: zero_shot_gains(result, scratch),
        }
        return self.result_type.of({**result, **control})


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


@dataclass(frozen=True)
class ZeroShotResult(RecordResult):
    """A zero-shot task's result: the kind's figures, and with a control the control's and the gains over it."""

    def run_record(self, name: str, weights: str) -> dict[str, Any]:
        return {"task": name, "weights": weights, **self.record}

    def own_logged(self) -> dict[str, float]:
        """The kind's own figures that go into metrics.jsonl (before the control's)."""
        raise NotImplementedError

    def logged(self) -> dict[str, float]:
        """The kind's figures, with the untrained control's accuracy and the gain over it when it had one."""
        figures = self.own_logged()
        if GAIN in self.record:
            control = self.record[SCRATCH][ACCURACY]
            figures |= {SCRATCH_ACCURACY: control, ACCURACY_GAIN: self.record[GAIN][ACCURACY]["gain"]}
        return figures

    def render_figures(self) -> None:
        """The kind's figures as rich tables."""
        raise NotImplementedError

    def render(self) -> None:
        """The kind's tables, then the gain over the control, per figure, in plain sentences when it had one."""
        self.render_figures()
        if GAIN not in self.record:
            return
        from lmpt.console import console

        names = {ACCURACY: "accuracy", EQUAL_LENGTH_ACCURACY: "accuracy on pairs of equal token length"}
        for figure, gain in self.record[GAIN].items():
            console.print(f"{describe_gain(names.get(figure, figure) + ':', gain)} (untrained {gain[SCRATCH]:.4f})")
