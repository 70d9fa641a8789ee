"""Which task's gain over the untrained control orders a study's objectives: the study's one stated rule.

RankRule: the objectives are ordered by their gain over the untrained control on the first zero-shot task by name
(its accuracy over every item). A zero-shot score reads the pre-trained weights as they are and its control is the
same architecture untrained, so the gain is what pre-training gave. A fine-tuned task trains the control too and can
make up for what pre-training gave (or hide it), so it orders the objectives only when the study scored no zero-shot
task with a control. study.md's gains and objectives, and the final runs' ranking, follow it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lmpt.downstream.figures import ACCURACY, ACCURACY_MEAN, metric_key, task_figure
from lmpt.report.ranking import Ranking
from lmpt.study.gains import GainTable, PooledGain
from lmpt.study.runs import FinalRun


@dataclass(frozen=True)
class RankRule:
    """Which task's gain over the untrained control orders a study's objectives (module docstring)."""

    task: str | None
    """None when no final run's record holds a gain over a control."""
    zero_shot: bool = True

    @property
    def key(self) -> str | None:
        """The final runs' figure of the task (`downstream/TASK/accuracy`, fine-tuned `.../accuracy_mean`)."""
        return None if self.task is None else metric_key(self.task, ACCURACY if self.zero_shot else ACCURACY_MEAN)

    @property
    def sentence(self) -> str:
        """The rule in words, for study.md and the document built on it; "" without a task."""
        if self.task is None:
            return ""
        if self.zero_shot:
            return (
                f"Ranked by the gain over the untrained control on {self.task}, zero-shot (the first zero-shot "
                "task by name, accuracy over all its items): a zero-shot score reads the pre-trained weights as "
                "they are, and the control is the same architecture untrained, so the gain is what pre-training "
                "gave. Fine-tuned tasks are shown, not ranked by: fine-tuning trains the control too and can make "
                "up for what pre-training gave."
            )
        return (
            f"Ranked by the gain over the untrained control on {self.task}, fine-tuned (the first task by name "
            "with a control): the study scored no zero-shot task with a control, whose gain would read the "
            "pre-trained weights as they are."
        )

    def gain(self, gains: GainTable, budget: str, objective: str) -> PooledGain | None:
        """The objective's pooled gain on the rule's task at `budget`."""
        return gains.get(budget, objective, self.task or "", ACCURACY)

    def order(self, gains: GainTable, budget: str, objectives: Sequence[str]) -> list[str]:
        """`objectives` by their gain at `budget`, largest first (those without one after, in their order)."""
        found = {name: g.gain for name in objectives if (g := self.gain(gains, budget, name)) is not None}
        return sorted(found, key=lambda name: -found[name]) + [n for n in objectives if n not in found]

    def ranking(self) -> Ranking:
        """How the final runs are ranked by the same rule: by their figure of the task (its interval and tests)."""
        assert self.key is not None
        kind = "zero-shot" if self.zero_shot else "fine-tuned"
        return Ranking(
            self.key,
            f"ranked by {task_figure(self.key)} (higher is better), {kind}: each run's own figure; the objectives "
            "are ordered by their gain over the untrained control on it (the gain table, as in study.md)",
            higher_is_better=True,
        )

    def caveat(self, gains: GainTable) -> str:
        """One sentence when no objective's gain on the task clears 0 at any budget; "" otherwise."""
        if self.task is None:
            return ""
        found = [self.gain(gains, b, o) for b in gains.budgets() for o in gains.objectives(b)]
        if any(g is not None and g.low > 0 for g in found):
            return ""
        return (
            f"No objective's gain on {self.task} is above 0 at 95% at any budget: at this scale the order is not "
            "evidence that one objective pre-trains better."
        )


def rank_rule(gains: GainTable, finals: dict[str, list[FinalRun]]) -> RankRule:
    """The study's RankRule: the first zero-shot task by name with a gain on record, else the first task with one."""
    tasks = sorted({task for task, figure in gains.task_figures() if figure == ACCURACY})
    logged = {key for runs in finals.values() for run in runs for key in run.downstream}
    zero_shot = [task for task in tasks if metric_key(task, ACCURACY) in logged]
    if zero_shot:
        return RankRule(zero_shot[0])
    return RankRule(tasks[0], zero_shot=False) if tasks else RankRule(None)
