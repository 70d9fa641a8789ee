"""The `lmpt-reproduce NAME` command: a published comparison run as a grid of ordinary lmpt runs over the slots, then
its document written into the reproduction's own folder (NAME.md beside the paper's figures, each named claim with
its verdict and the conditions table). `out=` and `readme=` publish it elsewhere, asked for explicitly. The same
command resumes a killed grid; `dry_run=true` shows the plan, its FLOPs and its time, and writes nothing."""

from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from lmpt.config.command_options import parse_command, require, run_command
from lmpt.console import console
from lmpt.errors import LmptError
from lmpt.reproduce.document import readme_text, update_readme, write_document
from lmpt.reproduce.grid import grid_time, plan_grid, print_plan, run_grid
from lmpt.reproduce.reproduction import Scale, read_finished, reproduction_class
from lmpt.stopping import exit_code, stop_on, stopped_by

PROG = "lmpt-reproduce"
SUMMARY = (
    "Run a published comparison as a grid of lmpt runs and write its document: the paper's claims and figures beside "
    "lmpt's, with intervals, the conditions each claim depends on (the paper's value and the grid's), and a verdict "
    "per named claim (reproduced, not reproduced, inconclusive at this scale). NAME: fim (Bavarian et al. 2022, "
    "fill-in-the-middle for free), repetition (Muennighoff et al. 2023, the data-constrained law's R_D*), crossover "
    "(Prabhudesai et al. 2025, diffusion's critical compute), diffusion-gap (Sahoo et al. 2024, masked diffusion's "
    "likelihood gap as tokens grow). scale=laptop finishes on 2 CPU cores; scale=paper plans the paper's smallest "
    "configuration that shows the claim. The same command resumes it."
)
POSITIONALS = [("NAME", "the reproduction (fim, repetition, crossover, diffusion-gap)")]
MAX_SEEDS = 100
"""More seeds than this are refused before the plan is made (an interval needs 2; 100 is past any use)."""


@dataclass
class ReproduceOptions:
    scale: Scale = Scale.laptop
    """laptop: what 2 CPU cores finish in about 90 minutes; paper: the paper's smallest configuration that shows the
    claim (planned anywhere with dry_run=true; run on a GPU or SLURM)."""
    dir: str = "outputs/reproductions/NAME"
    """Where its runs train (NAME: the reproduction's name); the same folder resumes it."""
    out: str = ""
    """Where the document, its plot and its summary are written (empty: into dir, beside the runs)."""
    readme: str = ""
    """A README whose table "Published results, reproduced" gets this reproduction's row (empty: none is touched)."""
    seeds: int | None = None
    """Seeds of every cell (default: the scale's, usually 3)."""
    corpus: list[str] = field(default_factory=list)
    """The text: data groups (shakespeare, wikitext, tinystories) or paths to text (empty: the scale's)."""
    ladder: list[str] = field(default_factory=list)
    """The model sizes (model widths, or model groups where the reproduction says so; empty: the scale's)."""
    budgets: list[str] = field(default_factory=list)
    """The training budgets in tokens (empty: the scale's)."""
    unique_tokens: list[str] = field(default_factory=list)
    """The counts of unique training tokens of a grid that takes them (empty: the scale's)."""
    epochs: list[str] = field(default_factory=list)
    """The epoch counts of a grid that takes them (each at least 1; empty: the scale's)."""
    slots: str = "auto"
    """Runs side by side: one core and thread each on a CPU, one GPU each with device=gpu, SLURM jobs queued at once
    with launcher=slurm (auto: as many as there are)."""
    device: str = "cpu"
    """Where a run trains: cpu, or gpu (a GPU a slot)."""
    launcher: str = "local"
    """local, or slurm: each run a SLURM job through submitit (`pip install "lmpt[slurm]"`)."""
    max_minutes: float = 120.0
    """Refuse, before starting, a CPU plan that would take longer than this."""
    dry_run: bool = False
    """Show the runs, their FLOPs (lmpt's count and the paper's 6ND), what is done and the time left (GPU-hours at a
    stated utilisation); write nothing."""
    reuse: bool = False
    """Train nothing: write the document from the runs already completed."""


def reproduce(argv: list[str]) -> None:
    (name,), o = parse_command(argv, PROG, SUMMARY, POSITIONALS, ReproduceOptions)
    require(
        o.max_minutes > 0,  # NaN is not above 0 either; inf: no limit
        f"max_minutes={o.max_minutes:g} must be a number of minutes above 0 (how long a plan may take; inf: no limit)",
    )
    require(o.seeds is None or o.seeds <= MAX_SEEDS, f"seeds={o.seeds} is more than {MAX_SEEDS}: give fewer seeds")
    require(o.device in ("cpu", "gpu"), f"device={o.device} must be cpu or gpu")
    require(o.launcher in ("local", "slurm"), f"launcher={o.launcher} must be local or slurm")
    cls = reproduction_class(name)
    reproduction = cls(
        o.scale,
        o.seeds,
        corpus=o.corpus,
        ladder=o.ladder,
        budgets=o.budgets,
        unique_tokens=o.unique_tokens,
        epochs=o.epochs,
    )
    folder = Path(o.dir.replace("NAME", name))
    out = Path(o.out) if o.out else folder
    if not o.dry_run:
        _check_writable(out)
        if o.readme:
            readme_text(Path(o.readme))  # a README that cannot take the row, refused before any run trains
    plan = plan_grid(
        reproduction,
        folder,
        o.slots,
        o.max_minutes if not o.reuse else float("inf"),
        o.device,
        o.launcher,
        dry_run=o.dry_run or o.reuse,
    )
    if o.dry_run:
        print_plan(reproduction, plan)
        return
    if not o.reuse:
        stop_on()
        try:
            console.print(
                f"{PROG} {name}: {len(plan.runs) - len(plan.done)} of {len(plan.runs)} runs to train, "
                f"{len(plan.slots)} slot(s), into {folder}"
            )
            run_grid(reproduction, plan)
        except BaseException:
            if (stop := stopped_by()) is None:  # whatever exception the stop became on the way out (lmpt.stopping)
                raise
            print(
                f"{PROG}: stopped by {stop.name}; run the same command to resume (completed runs are kept, the "
                "stopped ones continue from their checkpoints)",
                file=sys.stderr,
            )
            sys.exit(exit_code(stop))
    finished = read_finished(folder, plan.runs)
    findings = reproduction.analyse(finished)
    # each run's training and its downstream scoring, one core each (wall_s leaves the scoring out)
    core_s = sum(
        float(run.status.get("wall_s") or 0.0) + float(run.status.get("downstream_s") or 0.0) for run in finished
    )
    missing = len(plan.runs) - len(finished)
    path = write_document(reproduction, findings, out, grid_time(folder), core_s, missing)
    console.print(f"[bold]{findings.verdict}[/]", markup=True)
    if o.readme:
        update_readme(Path(o.readme), path.with_suffix(".json"))
    console.print(f"wrote {path}" + (f" and its row in {o.readme}" if o.readme else ""), markup=False)


def _check_writable(out: Path) -> None:
    """Refuse, before any run trains, an `out` that cannot take the document."""
    probe = out if out.exists() else next((p for p in out.parents if p.exists()), Path("."))
    require(probe.is_dir(), f"out={out} is not a folder: give a folder for the document")
    try:  # a file made and removed: as root, os.access says yes to /proc and read-only mounts alike
        with tempfile.NamedTemporaryFile(dir=probe, prefix=".lmpt-out-probe-"):
            pass
    except OSError as exc:
        raise LmptError(
            f"out={out} cannot be written ({exc.strerror or exc}): give a folder you may write in"
        ) from None


def main() -> None:
    run_command(reproduce)


if __name__ == "__main__":
    main()
