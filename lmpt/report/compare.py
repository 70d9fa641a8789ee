"""`lmpt-compare PATH... [--out DIR]`: a table of runs (finished or not) and their validation-loss curves.

Each PATH is a run directory or any directory holding runs (a sweep, a day of outputs/)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lmpt.errors import LmptError
from lmpt.report.runs import find_runs
from lmpt.report.sweep import ReportFiles, write_report

COMPARE_CSV = "compare.csv"
COMPARE_MD = "compare.md"
COMPARE_PLOT = "compare_val_loss.png"
COMPARE_RANKING_PLOT = "compare_ranking.png"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="lmpt-compare",
        description="Compare lmpt runs: print a table (overrides, status, final validation loss and perplexity, "
        "objective measures, downstream figures, tokens/s, loss-bearing tokens/s, FLOPs, wall time), ranked by a "
        "downstream figure every completed run has (downstream config group), else by the fixed-rate "
        "masked-token loss (val_fixed_loss) among mlm/nsp runs or by val_loss when every run has the same "
        "objective (the title says which): a downstream figure with its 95% interval and a Holm-corrected test "
        "of each run against the next (McNemar over items zero-shot, Welch's t over seeds fine-tuned). The "
        "console shows the key columns; the CSV and Markdown files hold them all, with a plot of every run's "
        "validation-loss curve against steps, training FLOPs and loss-bearing tokens and, ranked by a downstream "
        "figure, a chart of it per run with its 95% interval.",
    )
    parser.add_argument(
        "paths",
        nargs="+",
        type=Path,
        metavar="PATH",
        help="a run directory, or a directory searched for runs (a sweep directory, multirun/, outputs/)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("."),
        metavar="DIR",
        help=f"where to write {COMPARE_CSV}, {COMPARE_MD}, {COMPARE_PLOT} and {COMPARE_RANKING_PLOT} (default: .)",
    )
    parser.add_argument("--log-y", action="store_true", help="plot the validation loss on a log scale")
    return parser.parse_args(argv)


def compare(paths: list[Path], out: Path, log_y: bool = False) -> None:
    runs = find_runs(paths)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LmptError(f"cannot create --out directory {out}: {exc.strerror}") from exc
    title = f"{len(runs)} run{'s' if len(runs) != 1 else ''}"
    files = ReportFiles(*(out / name for name in (COMPARE_CSV, COMPARE_MD, COMPARE_PLOT, COMPARE_RANKING_PLOT)))
    write_report(runs, files, title, log_y=log_y)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    try:
        compare(args.paths, args.out, args.log_y)
    except LmptError as exc:
        print(f"lmpt-compare: error: {exc}", file=sys.stderr)
        sys.exit(LmptError.exit_code)


if __name__ == "__main__":
    main()
