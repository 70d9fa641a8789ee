"""A published result as a reproduction (principle 17): a paper's claim, a grid of ordinary lmpt runs that checks it at
a scale the machine finishes, and the analysis that sets the paper's figure beside lmpt's with intervals and a verdict.

A Reproduction subclass in a module of lmpt.reproduce is found by its `name` (`lmpt-reproduce NAME`). It says what it
checks (paper, claim, figure), which runs (`runs`: each an lmpt command and its own run directory under the
reproduction's folder) and what they show (`analyse`: a Findings of tables, a plot and a verdict). Running the grid,
resuming it after a kill, estimating its time and writing its document are the same for every reproduction
(lmpt.reproduce.grid, lmpt.reproduce.document)."""

from __future__ import annotations

import importlib
import math
import pkgutil
import statistics
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from matplotlib.figure import Figure

import lmpt.reproduce
from lmpt.downstream.significance import seed_interval
from lmpt.errors import LmptError
from lmpt.objectives.registry import OBJECTIVES
from lmpt.report.runs import read_records
from lmpt.rundir.directory import METRICS_FILE, read_status

TOKENS_PER_STEP = 16 * 128
"""Tokens an optimizer step of a reproduction's runs reads: lmpt's default batch, 16 windows of 128."""


@dataclass(frozen=True)
class PlannedRun:
    """One run of a reproduction: its name (its directory under the reproduction's folder), its lmpt keys, and what
    the analysis groups it by (objective, model, budget, seed, ...)."""

    name: str
    keys: tuple[str, ...]
    labels: dict[str, Any]
    flops: float
    """Its training FLOPs (6 N D plus attention, as lmpt counts them): what its time is estimated from."""


@dataclass
class FinishedRun:
    """A completed run as the analysis reads it: its labels, its status.json and its metrics.jsonl records."""

    planned: PlannedRun
    status: dict[str, Any]
    records: list[dict[str, Any]]

    def last(self, key: str) -> float:
        """The last logged value of `key` (NaN when never logged)."""
        values = [r[key] for r in self.records if r.get(key) is not None]
        return float(values[-1]) if values else math.nan

    def curve(self, key: str, x: str = "flops") -> list[tuple[float, float]]:
        """(x, key) of every record that logs both: a learning curve."""
        return [(float(r[x]), float(r[key])) for r in self.records if r.get(key) is not None and r.get(x) is not None]


@dataclass
class Findings:
    """What a reproduction found: the paper's figures beside lmpt's (markdown tables), a plot, and one sentence."""

    verdict: str
    """Reproduced, not reproduced, or reproduced in part (and which part), in one sentence."""
    headline: str
    """lmpt's figure in a few words, for the README's table."""
    sections: list[tuple[str, str]]
    """(heading, markdown) of each part of the document after the claim: tables, notes."""
    plot: Figure | None = None


class Reproduction(ABC):
    """A published comparison reproduced by a grid of runs. Subclasses set the class attributes and implement `runs`
    and `analyse`; `options` are the command's keys (seeds, slots, ...)."""

    name: ClassVar[str]
    title: ClassVar[str]
    """The result in a few words (the document's title)."""
    paper: ClassVar[str]
    """Authors, year, title and where (arXiv id)."""
    claim: ClassVar[str]
    """The exact claim checked, and the figure or section it is from."""
    papers_figures: ClassVar[str]
    """The paper's own numbers the reproduction sets lmpt's beside (markdown)."""
    cost_note: ClassVar[str] = ""
    """How the scale was chosen against the machine, and the larger version one key away."""
    default_seeds: ClassVar[int] = 3
    """The seeds `lmpt-reproduce NAME` runs when not given."""
    grid_keys: ClassVar[tuple[str, ...]] = ()
    """The command's grid keys (unique_tokens, epochs, ladder) this reproduction takes; any other given is refused."""

    def __init__(self, seeds: int, **grid: list[str]) -> None:
        if seeds < 1:
            raise LmptError(f"seeds={seeds} must be at least 1 (the reproduction needs 3 for an interval)")
        for key, value in grid.items():
            if value and key not in self.grid_keys:
                takes = f"it takes {', '.join(self.grid_keys)}" if self.grid_keys else "its grid is fixed"
                raise LmptError(f"{self.name} takes no {key}= key: {takes}")
        self.seeds = seeds
        self.grid = {key: value for key, value in grid.items() if value}

    @abstractmethod
    def runs(self) -> list[PlannedRun]:
        """Every run of the grid, in the order they start."""

    @abstractmethod
    def analyse(self, finished: list[FinishedRun]) -> Findings:
        """The findings from the grid's completed runs."""

    def command_line(self) -> str:
        """The command that runs (and resumes) this reproduction."""
        keys = [f"seeds={self.seeds}"] if self.seeds != self.default_seeds else []
        keys += [f"{key}=[{','.join(value)}]" for key, value in self.grid.items()]
        return " ".join([f"lmpt-reproduce {self.name}", *keys])


def _discover() -> dict[str, type[Reproduction]]:
    for module in pkgutil.iter_modules(lmpt.reproduce.__path__):
        if module.name != "__main__":  # the command itself, which runs when imported
            importlib.import_module(f"lmpt.reproduce.{module.name}")
    found: dict[str, type[Reproduction]] = {}
    stack = list(Reproduction.__subclasses__())
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if "name" in cls.__dict__:
            found[cls.name] = cls
    return dict(sorted(found.items()))


def reproduction_class(name: str) -> type[Reproduction]:
    """The reproduction called `name`, or one LmptError line listing those lmpt has."""
    known = _discover()
    if name not in known:
        raise LmptError(f"no reproduction called '{name}': choose one of {', '.join(known)} (`lmpt-reproduce --help`)")
    return known[name]


def read_finished(folder: Path, planned: list[PlannedRun]) -> list[FinishedRun]:
    """The completed runs of `planned` under `folder` (a run not completed is left out)."""
    finished = []
    for run in planned:
        status = read_status(folder / run.name)
        if status.get("status") == "completed":
            finished.append(FinishedRun(run, status, read_records(folder / run.name / METRICS_FILE)))
    return finished


def mean_cell(values: list[float], spec: str = ".3f") -> str:
    """A table cell: the mean over seeds and its 95% t interval (the mean alone from one seed; a dash from none)."""
    if not values:
        return "—"
    span = seed_interval(values)
    mean = f"{statistics.fmean(values):{spec}}"
    return mean if span is None else f"{mean} [{span[0]:{spec}}, {span[1]:{spec}}]"


def bound_note(objective: str) -> str:
    """ " (bound)" after an objective whose held-out figure is an upper bound (its measure says so)."""
    return " (bound)" if OBJECTIVES[objective].likelihood == "bound" else ""
