"""A published result as a reproduction (principle 17): a paper's claim, a grid of ordinary lmpt runs that checks it at
a scale the machine finishes, and the analysis that sets the paper's figure beside lmpt's with intervals and a verdict.

A Reproduction subclass in lmpt.reproduce (each in its own subpackage, lmpt/reproduce/NAME/) is found by its `name`
(`lmpt-reproduce NAME`). It says what it checks (paper, claim, figure), which runs (`runs`: each an lmpt command and
its own run directory under the reproduction's folder) and what they show (`analyse`: a Findings of named claims each
with its verdict, the conditions table, tables and a plot). Its scale is keys (principle 18): `scales` gives the grid
keys' values at each named scale (laptop: what 2 CPU cores finish in about 90 minutes; paper: the paper's smallest
configuration that shows the claim), and the command's own keys override them. Running the grid, resuming it after a
kill, estimating its time and writing its document are the same for every reproduction (lmpt.reproduce.grid,
lmpt.reproduce.document), and so is the way its figures are written (lmpt.reproduce.figures)."""

from __future__ import annotations

import importlib
import math
import pkgutil
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from matplotlib.figure import Figure
from omegaconf import DictConfig, OmegaConf

import lmpt.reproduce
from lmpt.config.schema import Choice
from lmpt.config.store import conf_dir
from lmpt.errors import LmptError
from lmpt.report.runs import read_records
from lmpt.reproduce.verdict import ClaimVerdict, Condition, summary
from lmpt.rundir.directory import METRICS_FILE, read_status

TOKENS_PER_STEP = 16 * 128
"""Tokens an optimizer step of a reproduction's runs reads: lmpt's default batch, 16 windows of 128."""
AR = "clm"
DIFFUSION = "mdlm"
"""The objectives of the autoregressive and the masked-diffusion arms the reproductions compare."""
GRID_KEYS = ("corpus", "ladder", "budgets", "unique_tokens", "epochs")
"""The command's keys that set a grid's scale (each a list); a reproduction names those it takes in `grid_keys`."""
CONF_DATA = conf_dir() / "data"
HUB_CORPORA = {"c4": ("data=hf", "data.name=allenai/c4", "data.subset=en")}
"""Papers' corpora a grid key names, streamed from the Hub by data=hf (`pip install 'lmpt[hf]'`)."""


class Scale(Choice):
    """lmpt-reproduce's scale=: the grid's key values a reproduction ships for it."""

    laptop = "laptop"
    """What 2 CPU cores finish in about 90 minutes."""
    paper = "paper"
    """The paper's smallest configuration that shows the claim: planned anywhere, run where a GPU (or SLURM) is."""


@dataclass(frozen=True)
class PlannedRun:
    """One run of a reproduction: its name (its directory under the reproduction's folder), its lmpt keys, and what
    the analysis groups it by (objective, model, budget, seed, ...)."""

    name: str
    keys: tuple[str, ...]
    labels: dict[str, Any]
    flops: float
    """Its training FLOPs (6 N D plus attention, as lmpt counts them): what its time is estimated from."""
    paper_flops: float = 0.0
    """Its training compute as the paper counts it (6 N D, N as the paper counts parameters); 0: not stated."""


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
    """What a reproduction found: each named claim with its verdict (lmpt.reproduce.verdict), the conditions they
    depend on (the paper's value beside the grid's), tables of lmpt's figures beside the paper's, and a plot."""

    claims: list[ClaimVerdict]
    conditions: list[Condition]
    headline: str
    """lmpt's figure in a few words, for the README's table."""
    sections: list[tuple[str, str]]
    """(heading, markdown) of each part of the document after the verdicts: tables, notes."""
    plot: Figure | None = None

    @property
    def verdict(self) -> str:
        """The verdicts in one line: one word when every claim has it, else each named claim with its own."""
        return summary(self.claims)


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
    """How the scale was chosen against the machine, and what the paper's scale asks for."""
    grid_keys: ClassVar[tuple[str, ...]] = ()
    """The command's grid keys (of GRID_KEYS) this reproduction takes; any other given is refused."""
    scales: ClassVar[dict[Scale, dict[str, Any]]] = {}
    """Each scale's values of the grid keys (lists of strings, as the command gives them) and its `seeds`."""

    def __init__(self, scale: Scale = Scale.laptop, seeds: int | None = None, **given: list[str]) -> None:
        for key, value in given.items():
            if value and key not in self.grid_keys:
                takes = f"it takes {', '.join(self.grid_keys)}" if self.grid_keys else "its grid is fixed"
                raise LmptError(f"{self.name} takes no {key}= key: {takes}")
        defaults = self.scales.get(scale)
        if defaults is None:
            raise LmptError(f"{self.name} has no scale={scale}: it has {', '.join(map(str, self.scales))}")
        seeds = int(defaults.get("seeds", 3)) if seeds is None else seeds
        if seeds < 1:
            raise LmptError(f"seeds={seeds} must be at least 1 (an interval over seeds needs 2; 3 are usual)")
        self.scale = scale
        self.seeds = seeds
        self.given = {key: list(value) for key, value in given.items() if value}
        """The grid keys the command gave (the rest are the scale's)."""
        self.grid = {key: [str(v) for v in defaults.get(key, [])] for key in self.grid_keys} | self.given

    @property
    def default_seeds(self) -> int:
        return int(self.scales.get(self.scale, {}).get("seeds", 3))

    @abstractmethod
    def runs(self) -> list[PlannedRun]:
        """Every run of the grid, in the order they start."""

    @abstractmethod
    def analyse(self, finished: list[FinishedRun]) -> Findings:
        """The findings from the grid's completed runs."""

    def check_text(self) -> None:
        """Refuse, in one LmptError line before any run starts, text too small for the grid (say how much it needs).
        Called when a grid is launched, never for a dry run: it may tokenise the text into lmpt's cache. None to
        check by default."""
        return None

    def command_line(self) -> str:
        """The command that runs (and resumes) this reproduction."""
        keys = [f"scale={self.scale}"] if self.scale is not Scale.laptop else []
        keys += [f"seeds={self.seeds}"] if self.seeds != self.default_seeds else []
        keys += [f"{key}=[{','.join(value)}]" for key, value in self.given.items()]
        return " ".join([f"lmpt-reproduce {self.name}", *keys])


def corpus_groups() -> list[str]:
    """lmpt's data groups that name their own text (shakespeare, wikitext, tinystories, mixture): `data=text` and
    `data=hf` are forms that need a path or a dataset besides, so no corpus on their own."""
    named = []
    for group in sorted(CONF_DATA.glob("*.yaml")):
        node = OmegaConf.load(group)
        if isinstance(node, DictConfig) and (node.get("paths") or node.get("sources") or node.get("name")):
            named.append(group.stem)
    return named


def corpus_keys(corpus: str) -> tuple[str, ...]:
    """The lmpt keys that choose `corpus`: a paper's corpus streamed from the Hub (HUB_CORPORA), a data group of
    lmpt's that names its text (`corpus_groups`) or a path to text (a file, folder or glob, as `data=text
    data.paths=` takes); one LmptError line for neither."""
    if corpus in HUB_CORPORA:
        return HUB_CORPORA[corpus]
    groups = corpus_groups()
    if corpus in groups:
        return (f"data={corpus}",)
    if (CONF_DATA / f"{corpus}.yaml").is_file():
        raise LmptError(
            f"corpus={corpus} is a form of data group that names no text of its own: give a path (corpus=PATH, "
            f"a file, folder or glob) or one of {', '.join(groups)}"
        )
    if any(ch in corpus for ch in "*?[") or Path(corpus).exists():
        path = corpus if any(ch in corpus for ch in "*?[") else str(Path(corpus).resolve())
        return ("data=text", f"data.paths=[{path}]")
    raise LmptError(f"corpus={corpus} is neither a data group ({', '.join(groups)}) nor a path that exists")


def numbers(reproduction: Reproduction, key: str, kind: type = float, least: float = 1) -> list:
    """The grid key's values as numbers of `kind`, each finite and at least `least`; one LmptError line otherwise."""
    values = []
    for raw in reproduction.grid.get(key, []):
        try:
            value = kind(float(raw)) if kind is int else kind(raw)
        except (ValueError, OverflowError):
            raise LmptError(
                f"{key}={raw} must be a number ({reproduction.name}'s {key} is a list of numbers)"
            ) from None
        if not math.isfinite(float(value)) or value < least:
            raise LmptError(f"{key}={raw} must be a finite number of at least {least:g}")
        if kind is int and float(raw) != value:
            raise LmptError(f"{key}={raw} must be a whole number ({reproduction.name}'s {key} counts whole units)")
        values.append(value)
    if not values:
        raise LmptError(f"{key}=[] gives {reproduction.name} no grid: give at least one value")
    return values


def _discover() -> dict[str, type[Reproduction]]:
    for module in pkgutil.walk_packages(lmpt.reproduce.__path__, "lmpt.reproduce."):
        if module.name != "lmpt.reproduce.__main__":  # the command itself, which runs when imported
            importlib.import_module(module.name)
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
