"""The order a study trains its runs in, over its slots (lmpt.study.pool): every search trial first (each objective's
in turn), then each objective's finals as soon as its search has chosen, the smallest budget first, every objective
at it before the next. One slot trains them one after another in that order; several train them side by side. What a
run trains never depends on the order runs end in (every trial's recipe is drawn before any runs), and the records
are read back from the run directories in the plan's order, so the study's record is the same in any order of
completion. Runs that finished (trials completed or failed on their own, finals completed) are found by their records
and not run again."""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field

from lmpt.console import console
from lmpt.errors import LmptError
from lmpt.report.runs import read_status
from lmpt.study.finals import FinalRun, completed, final_launch, read_final
from lmpt.study.launch import StudyStopped
from lmpt.study.plan import StudyPlan
from lmpt.study.pool import Launch, LocalPool, SlurmPool
from lmpt.study.search import Search, check_search, check_trial, read_search, unfinished_trials

Record = Callable[[dict[str, Search], dict[str, list[FinalRun]]], object]
"""Writes the study's record (lmpt.study.record.write_study, bound to the plan)."""


@dataclass
class StudyRuns:
    """The study's runs in flight and still to train, and what the finished ones recorded."""

    plan: StudyPlan
    pool: LocalPool | SlurmPool
    record: Record
    searches: dict[str, Search] = field(default_factory=dict)
    """Each objective's search, once every trial finished and it chose a recipe."""
    _queue: list[tuple[tuple[int, ...], int, Launch]] = field(default_factory=list)
    _left: dict[str, set[int]] = field(default_factory=dict)
    """Each objective's trials still running or queued."""
    _finals: set[str] = field(default_factory=set)
    """The final runs the study launched or found completed (their directories): the ones its record reads."""
    _failure: LmptError | None = None

    def run(self) -> None:
        """Train every run the study still lacks. A run that cannot finish (a trial that did not, a search without a
        completed trial) stops new runs from starting; those in flight end first, then it is raised. A stop signal
        is passed on to the runs in flight (lmpt.study.pool), then raised."""
        try:
            for name in self.plan.objectives:
                self._queue_search(name)
            while self._queue or self.pool.running:
                while self._queue and self.pool.free and self._failure is None:
                    self._start(heapq.heappop(self._queue)[2])
                if not self.pool.running:
                    break
                for launch, code in self.pool.wait():
                    self._ended(launch, code)
        except StudyStopped:
            self.pool.stop()
            raise
        if self._failure is not None:
            raise self._failure

    def finals(self) -> dict[str, list[FinalRun]]:
        """The final runs the study launched or reused, as their directories record them, in the plan's order."""
        found: dict[str, list[FinalRun]] = {}
        for budget in self.plan.budgets:
            for name in self.plan.objectives:
                for seed in self.plan.seeds:
                    launch = self._final(name, budget, seed) if name in self.searches else None
                    if launch is not None and str(launch.path) in self._finals:
                        found.setdefault(name, []).append(read_final(launch.path, name, seed, budget, self.plan.tasks))
        return {name: found[name] for name in self.plan.objectives if name in found}

    def write(self) -> None:
        """The study's record as it stands: the searches and finals, in the plan's order."""
        searches = {name: self.searches[name] for name in self.plan.objectives if name in self.searches}
        self.record(searches, self.finals())

    def _push(self, order: tuple[int, ...], launch: Launch) -> None:
        heapq.heappush(self._queue, (order, len(self._queue), launch))

    def _queue_search(self, name: str) -> None:
        search = read_search(self.plan, name)
        todo = unfinished_trials(self.plan, search)
        if not todo:
            console.print(f"search {name}: {self.plan.trials} trials done, reused")
            self._chose(check_search(self.plan, search))
            return
        self._left[name] = {launch.trial for launch in todo if launch.trial is not None}
        for launch in todo:
            self._push((0, self.plan.objectives.index(name), launch.trial or 0), launch)

    def _final(self, name: str, budget: str, seed: int) -> Launch:
        return final_launch(self.plan, budget, name, seed, self.searches[name].chosen().recipe)  # type: ignore[union-attr]

    def _chose(self, search: Search) -> None:
        """The objective's search is done: its record written, its finals queued (a completed one is reused)."""
        name = search.objective
        self.searches[name] = search
        self.write()
        for b, budget in enumerate(self.plan.budgets):
            for s, seed in enumerate(self.plan.seeds):
                launch = self._final(name, budget, seed)
                if completed(launch.path):
                    self._finals.add(str(launch.path))
                    console.print(f"{launch.name}: completed, reused")
                else:
                    self._push((1, b, self.plan.objectives.index(name), s), launch)

    def _start(self, launch: Launch) -> None:
        try:
            slot = self.pool.start(launch)
        except LmptError as exc:
            self._failure = self._failure or exc
            return
        if launch.trial is not None:
            recipe, budget = self.plan.recipes[launch.trial], f" at trainer.budget={self.plan.search_budget}"
        else:
            recipe, budget = self.searches[launch.objective].chosen().recipe, ""  # type: ignore[union-attr]
            self._finals.add(str(launch.path))
        keys = " ".join(f"{key}={value}" for key, value in recipe.items())
        where = f" on {slot}" if self.pool.side_by_side else ""
        console.print(f"{launch.name}{budget}: {keys} into {launch.path}{where}")

    def _ended(self, launch: Launch, code: int | None) -> None:
        if self.pool.side_by_side:
            console.print(f"{launch.name}: ended ({read_status(launch.path).get('status', 'no status')})")
        if launch.trial is None:
            return
        try:
            check_trial(self.plan, launch, code)
            left = self._left[launch.objective]
            left.discard(launch.trial)
            if not left:
                self._chose(check_search(self.plan, read_search(self.plan, launch.objective)))
        except LmptError as exc:
            self._failure = self._failure or exc
