"""The `lmpt-reproduce NAME` command: a published comparison run as a grid of ordinary lmpt runs over the slots, then
its document written (docs/reproductions/NAME.md beside the paper's figure, and the README's table). The same command
resumes a killed grid; `dry_run=true` shows the plan and its time and writes nothing."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from lmpt.config.command_options import parse_command, require, run_command
from lmpt.console import console
from lmpt.reproduce.document import update_readme, write_document
from lmpt.reproduce.grid import grid_time, plan_grid, print_plan, run_grid
from lmpt.reproduce.reproduction import read_finished, reproduction_class
from lmpt.study.pool import StudyStopped, stop_on_signals
from lmpt.train.preemption import EXIT_PREEMPTED

PROG = "lmpt-reproduce"
SUMMARY = (
    "Run a published comparison at a scale this machine finishes and write docs/reproductions/NAME.md: the paper's "
    "claim and figures beside lmpt's, with intervals, a plot and a one-sentence verdict. NAME: fim (Bavarian et al. "
    "2022, fill-in-the-middle for free), repetition (Muennighoff et al. 2023, R_D* for clm and mdlm), crossover "
    "(Prabhudesai et al. 2025, diffusion's critical compute). The same command resumes it."
)
POSITIONALS = [("NAME", "the reproduction (fim, repetition, crossover)")]


@dataclass
class ReproduceOptions:
    dir: str = "outputs/reproductions/NAME"
    """Where its runs train (NAME: the reproduction's name); the same folder resumes it."""
    out: str = "docs/reproductions"
    """Where the document, its plot and its summary are written."""
    readme: str = "README.md"
    """The README whose table "Published results, reproduced" is rebuilt (left alone when it has no such table)."""
    seeds: int | None = None
    """Seeds of every cell (default: the reproduction's own, 3; crossover 2, as its paper's frontiers)."""
    unique_tokens: list[str] = field(default_factory=list)
    """The counts of unique training tokens of a grid that takes them (crossover; empty: its own)."""
    epochs: list[str] = field(default_factory=list)
    """The epoch counts of a grid that takes them (crossover; each at least 1; empty: its own)."""
    ladder: list[str] = field(default_factory=list)
    """The model widths of a grid that takes them (crossover; empty: its own)."""
    slots: str = "auto"
    """Runs side by side, one core and thread each (auto: one per core)."""
    max_minutes: float = 120.0
    """Refuse, before starting, a plan that would take longer than this."""
    dry_run: bool = False
    """Show the runs, what is done and the time left; write nothing."""
    reuse: bool = False
    """Train nothing: write the document from the runs already completed."""


def reproduce(argv: list[str]) -> None:
    (name,), o = parse_command(argv, PROG, SUMMARY, POSITIONALS, ReproduceOptions)
    require(
        o.max_minutes > 0,  # NaN is not above 0 either; inf: no limit
        f"max_minutes={o.max_minutes:g} must be a number of minutes above 0 (how long a plan may take; inf: no limit)",
    )
    cls = reproduction_class(name)
    seeds = cls.default_seeds if o.seeds is None else o.seeds
    reproduction = cls(seeds, unique_tokens=o.unique_tokens, epochs=o.epochs, ladder=o.ladder)
    folder = Path(o.dir.replace("NAME", name))
    plan = plan_grid(reproduction, folder, o.slots, o.max_minutes if not o.reuse else float("inf"))
    if o.dry_run:
        print_plan(reproduction, plan)
        return
    if not o.reuse:
        stop_on_signals()
        try:
            console.print(
                f"{PROG} {name}: {len(plan.runs) - len(plan.done)} of {len(plan.runs)} runs to train, "
                f"{len(plan.slots)} slot(s), into {folder}"
            )
            run_grid(reproduction, plan)
        except StudyStopped as exc:
            print(
                f"{PROG}: stopped by {exc.signal.name}; run the same command to resume (completed runs are kept, the "
                "stopped ones continue from their checkpoints)",
                file=sys.stderr,
            )
            sys.exit(EXIT_PREEMPTED if exc.signal.name == "SIGTERM" else 130)
    finished = read_finished(folder, plan.runs)
    findings = reproduction.analyse(finished)
    # each run's training and its downstream scoring, one core each (wall_s leaves the scoring out)
    core_s = sum(
        float(run.status.get("wall_s") or 0.0) + float(run.status.get("downstream_s") or 0.0) for run in finished
    )
    path = write_document(reproduction, findings, Path(o.out), grid_time(folder)["wall_s"], core_s)
    console.print(f"[bold]{findings.verdict}[/]")
    console.print(
        f"wrote {path}" + (f" and the table in {o.readme}" if update_readme(Path(o.readme), Path(o.out)) else "")
    )


def main() -> None:
    run_command(reproduce)


if __name__ == "__main__":
    main()
