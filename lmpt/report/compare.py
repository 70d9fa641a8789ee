"""`lmpt-compare PATH... [out=DIR] [log_y=true]`: a table of runs (finished or not) and their validation-loss curves.

Each PATH is a run directory or any directory holding runs (a sweep, a day of outputs/)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.markup import escape

from lmpt.config.command_options import parse_command, run_command
from lmpt.console import warn
from lmpt.errors import LmptError
from lmpt.report.runs import find_runs, missing_parts
from lmpt.report.sweep import ReportFiles, write_report

COMPARE_CSV = "compare.csv"
COMPARE_MD = "compare.md"
COMPARE_PLOT = "compare_val_loss.png"
COMPARE_RANKING_PLOT = "compare_ranking.png"


PROG = "lmpt-compare"
SUMMARY = (
    "Compare lmpt runs: print a table (overrides, status, final validation loss and perplexity, objective measures, "
    "downstream figures, tokens/s, loss-bearing tokens/s, FLOPs, wall time), ranked by a downstream figure every "
    "completed run has (downstream config group), else by the fixed-rate masked-token loss (val_fixed_loss) among "
    "mlm/nsp runs or by val_loss when every run has the same objective (the title says which): a downstream figure "
    "with its 95% interval and a Holm-corrected test of each run against the next (McNemar over items zero-shot, "
    "Welch's t over seeds fine-tuned). The console shows the key columns; the CSV and Markdown files hold them all, "
    "with a plot of every run's validation-loss curve against steps, training FLOPs and loss-bearing tokens and, "
    "ranked by a downstream figure, a chart of it per run with its 95% interval."
)
POSITIONALS = [
    ("PATH...", "a run directory, or a directory searched for runs (a sweep directory, multirun/, outputs/)")
]
LEGACY_FLAGS = {"--out": "out", "--log-y": "log_y"}
"""The argparse flags lmpt-compare took before it read key=value options like lmpt's other commands: still
accepted, with a one-line note."""


@dataclass
class CompareOptions:
    out: str = "."
    """Where to write compare.csv, compare.md, compare_val_loss.png and compare_ranking.png."""
    log_y: bool = False
    """Plot the validation loss on a log scale."""


def modern_argv(argv: list[str]) -> list[str]:
    """`argv` with the old flags (`--out DIR`, `--log-y`) as key=value options, said once on the console."""
    tokens, old = list(argv), []
    for flag, key in LEGACY_FLAGS.items():
        while flag in tokens:
            at = tokens.index(flag)
            takes_value = key == "out" and at + 1 < len(tokens)
            value = tokens[at + 1] if takes_value else "true"
            tokens[at : at + 1 + takes_value] = [f"{key}={value}"]
            old.append(f"{flag} is now {key}={value if takes_value else 'true'}")
    if old:
        warn(f"{'; '.join(old)} (the old form is accepted for a while)")
    return tokens


def compare(paths: list[Path], out: Path, log_y: bool = False) -> None:
    runs = find_runs(paths)
    for run in runs:  # a run read in part is said, not silently shown empty or left unranked
        for missing in missing_parts(run):
            warn(f"{escape(str(run.path))}: {missing}")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LmptError(f"cannot create out={out}: {exc.strerror}") from exc
    title = f"{len(runs)} run{'s' if len(runs) != 1 else ''}"
    files = ReportFiles(*(out / name for name in (COMPARE_CSV, COMPARE_MD, COMPARE_PLOT, COMPARE_RANKING_PLOT)))
    write_report(runs, files, title, log_y=log_y)


def _compare_command(argv: list[str]) -> None:
    paths, o = parse_command(modern_argv(argv), PROG, SUMMARY, POSITIONALS, CompareOptions)
    compare([Path(p) for p in paths], Path(o.out), o.log_y)


def main(argv: list[str] | None = None) -> None:
    run_command(_compare_command, PROG, argv)


if __name__ == "__main__":
    main()
