"""Chaos soak: kill real lmpt runs (kill -9 and SIGTERM) at random moments, resume them, and check that nothing
was lost or changed against the same run never stopped.

    python scripts/chaos.py --kills 200 --out docs/chaos        # every case; the table in docs/chaos.md
    python scripts/chaos.py --kills 6 --cases clm,ddp --seed 3  # a quick look

Each case (the nine objectives, a data mixture, a model.init_from stage, DDP under torchrun) first runs once
uninterrupted from an empty token cache. Then, in rounds that each start from an empty cache too, its command is
started, killed at a moment aimed at one phase (start-up, cache build, a step, an evaluation, a checkpoint write),
restarted (the same command or `lmpt trainer.resume=RUN_DIR`), killed again ... and finally let finish. Where
each kill landed is read from what the run exposes when it died: its lmpt.log lines and checkpoints/ staging
directories. A finished round must log the same losses (metrics.jsonl, bit for bit) and end with the same
weights as the uninterrupted run, from a token cache identical to a clean build; a SIGTERM inside the training
loop must exit 75 with a committed checkpoint; every committed checkpoint must match its manifest."""

from __future__ import annotations

import argparse
import os
import platform
import random
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from chaos_harness.cases import CASES, split_kills
from chaos_harness.report import print_table, write
from chaos_harness.soak import AIMS, golden, soak
from rich.console import Console


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=200, help="kills in all, shared out over the cases")
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of: {', '.join(CASES)}")
    parser.add_argument("--seed", type=int, default=0, help="the moments, signals and phases aimed at follow it")
    parser.add_argument("--phases", default=",".join(AIMS), help=f"what kills aim at, of: {', '.join(AIMS)}")
    parser.add_argument("--sigterm", type=float, default=0.3, help="the share of kills sent as SIGTERM")
    parser.add_argument("--out", type=Path, help="write chaos.md (the table) and chaos.json (every kill) here")
    parser.add_argument("--work", type=Path, help="where the runs go (default: a temporary folder, removed if clean)")
    args = parser.parse_args(argv)
    names = [n for n in args.cases.split(",") if n]
    unknown = [n for n in names if n not in CASES]
    if unknown or not names or args.kills < 1:
        parser.error(f"unknown case(s) {unknown}, or no kills: choose among {', '.join(CASES)}")
    args.cases = names
    args.phases = [p for p in args.phases.split(",") if p]
    if not args.phases or any(p not in AIMS for p in args.phases):
        parser.error(f"--phases {','.join(args.phases)}: choose among {', '.join(AIMS)}")
    return args


def _cpu() -> str:
    lines = Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() else []
    names = [line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")]
    return names[0] if names else platform.machine()


def _facts(argv: list[str] | None, wall: float) -> dict[str, str]:
    """The command, date, machine and wall time, written above the table."""
    return {
        "command": "python scripts/chaos.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{_cpu()}, {len(os.sched_getaffinity(0))} cores (shared), Python {platform.python_version()}",
        "wall time": f"{wall / 60:.1f} min",
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    console = Console(width=None if sys.stdout.isatty() else 200)  # a log file gets the whole table, 16 columns
    work = args.work or Path(tempfile.mkdtemp(prefix="lmpt-chaos-"))
    work.mkdir(parents=True, exist_ok=True)
    cases = [case for name, case in CASES.items() if name in args.cases]  # a stage after the run it continues
    kills = split_kills(args.kills, cases)
    started, results = time.monotonic(), []
    for case in cases:
        source = None
        if case.init_from:  # the stage continues the finished uninterrupted run of another case
            source = work / case.init_from / "golden"
            if not (source / "model.safetensors").exists():
                golden(CASES[case.init_from], work, None)
        rng = random.Random(f"{args.seed}-{case.name}")
        results.append(soak(case, kills[case.name], work, source, rng, args.sigterm, args.phases, console))
        if args.out:  # the table so far, should the soak be stopped
            write(results, args.out, _facts(argv, time.monotonic() - started))
    facts = _facts(argv, time.monotonic() - started)
    print_table(results, console)
    console.print(f"{sum(len(r.kills) for r in results)} kills in {facts['wall time']}")
    if args.out:
        console.print(f"wrote {args.out / 'chaos.md'} and {args.out / 'chaos.json'}")
    clean = all(r.verdict == "identical" for r in results)
    if clean and args.work is None:
        shutil.rmtree(work, ignore_errors=True)
    elif not clean:
        console.print(f"[bold red]runs kept for inspection in {work}[/]")
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
