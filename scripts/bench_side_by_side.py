"""Two default runs side by side on 2 cores against one alone: does each run still finish in reasonable time when
another shares its cores? Each run takes its threads from the cores free of other work (lmpt.train.placement); before
that, two runs each taking both cores crawled 10-25 times slower than one alone. Goal: each of the two within 2.5x of
the run alone.

Every run is the README's first command (`lmpt`, the default run; --overrides adds keys), started in its own
temporary directory as a user would, on the same 2 cores (the first two this process may use), with the user's
OMP_NUM_THREADS and LMPT_THREADS removed so that each run chooses its own threads. The token cache and tokenizer are
built once before anything is timed (a shared cache directory, one untimed 1-step run), so every timed run is
start-up plus training. Rounds alternate: alone, then the pair, then alone again, ...; the table gives medians of the
wall times and of the training seconds the runs record (status.json's train_s), and each ratio against alone.

    python scripts/bench_side_by_side.py                       # the default run, 1 round
    python scripts/bench_side_by_side.py --rounds 3 --json side_by_side.json
    python scripts/bench_side_by_side.py --overrides "trainer.max_steps=5"   # a quick check that it works
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GOAL = 2.5
"""Each side-by-side run should take at most this many times the wall time of one run alone."""


@dataclass(frozen=True)
class Timing:
    """One run's wall time (the process's, start-up included), its training seconds and the threads it took."""

    wall_s: float
    train_s: float
    threads: str


def two_cores() -> set[int]:
    """The first two cores this process may use (all of them where there are fewer)."""
    return set(sorted(os.sched_getaffinity(0))[:2])


def run_env(cache: Path) -> dict[str, str]:
    """The environment of every run: the shared cache, lmpt from this checkout, no thread count imposed."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "LMPT_THREADS", "HYDRA_FULL_ERROR")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return {**env, "LMPT_CACHE_DIR": str(cache)}


def start(overrides: list[str], cache: Path, cores: set[int]) -> tuple[subprocess.Popen, Path, float]:
    """Start `lmpt OVERRIDES` in a new directory beside `cache`, pinned to `cores`: (process, run directory, start)."""
    workdir = Path(tempfile.mkdtemp(prefix="run-", dir=cache.parent))
    run_dir = workdir / "run"
    command = [sys.executable, "-m", "lmpt", *overrides, "trainer.progress=plain", f"hydra.run.dir={run_dir}"]
    began = time.perf_counter()
    with (workdir / "lmpt.log").open("w") as log:  # the child keeps its own copy of the descriptor
        process = subprocess.Popen(
            command,
            cwd=workdir,
            env=run_env(cache),
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=lambda: os.sched_setaffinity(0, cores),
        )
    return process, run_dir, began


def finish(process: subprocess.Popen, run_dir: Path, began: float) -> Timing:
    """Wait for a run started by `start` and read what it recorded; a failed run stops the benchmark with its log."""
    process.wait()
    wall = time.perf_counter() - began
    log = (run_dir.parent / "lmpt.log").read_text()
    if process.returncode != 0:
        sys.exit(f"bench_side_by_side: a run failed (exit {process.returncode}); its output:\n{log[-3000:]}")
    status = json.loads((run_dir / "status.json").read_text())
    line = next((ln for ln in log.splitlines() if " thread" in ln and "parameters)" in ln), "")
    threads = line.split(" with ", 1)[1].split(", run directory")[0] if " with " in line else "?"
    return Timing(round(wall, 2), float(status.get("train_s") or 0.0), threads)


def alone(overrides: list[str], cache: Path, cores: set[int]) -> Timing:
    """One run on `cores` with nothing else started beside it."""
    return finish(*start(overrides, cache, cores))


def pair(overrides: list[str], cache: Path, cores: set[int]) -> list[Timing]:
    """Two runs started together on the same `cores`."""
    started = [start(overrides, cache, cores) for _ in range(2)]
    return [finish(*s) for s in started]


def summarize(alones: list[Timing], pairs: list[list[Timing]]) -> dict:
    """Medians and ratios: each side-by-side run's wall and training time against the median run alone."""
    alone_wall = statistics.median(t.wall_s for t in alones)
    alone_train = statistics.median(t.train_s for t in alones)
    together = [t for p in pairs for t in p]
    worst = max(t.wall_s for t in together) / alone_wall
    return {
        "alone_wall_s": alone_wall,
        "alone_train_s": alone_train,
        "side_by_side_wall_s": statistics.median(t.wall_s for t in together),
        "side_by_side_train_s": statistics.median(t.train_s for t in together),
        "wall_ratio_median": round(statistics.median(t.wall_s for t in together) / alone_wall, 3),
        "wall_ratio_worst": round(worst, 3),
        "train_ratio_median": round(statistics.median(t.train_s for t in together) / max(alone_train, 1e-9), 3),
        "goal": GOAL,
        "met": worst <= GOAL,
        "runs": {"alone": [asdict(t) for t in alones], "side_by_side": [[asdict(t) for t in p] for p in pairs]},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=1, help="rounds of (one run alone, then two side by side)")
    parser.add_argument("--overrides", default="", help="lmpt overrides for every run (default: none, the default run)")
    parser.add_argument("--json", default=None, help="write the figures to this file")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    overrides = shlex.split(args.overrides)
    cores = two_cores()
    with tempfile.TemporaryDirectory(prefix="side-by-side-") as scratch:
        cache = Path(scratch) / "cache"  # the runs' directories sit beside it, all removed at the end
        print(f"cores {sorted(cores)}; overrides: {' '.join(overrides) or '(none: the default run)'}", flush=True)
        finish(*start([*overrides, "trainer.max_steps=1", "trainer.sample_tokens=0"], cache, cores))  # caches built
        alones, pairs = [], []
        for round_ in range(args.rounds):
            alones.append(alone(overrides, cache, cores))
            print(f"round {round_ + 1}: alone {alones[-1].wall_s:.1f}s ({alones[-1].threads})", flush=True)
            pairs.append(pair(overrides, cache, cores))
            each = ", ".join(f"{t.wall_s:.1f}s ({t.threads})" for t in pairs[-1])
            print(f"round {round_ + 1}: side by side {each}", flush=True)
    figures = summarize(alones, pairs)
    verdict = "met" if figures["met"] else "missed"
    print(
        f"alone {figures['alone_wall_s']:.1f}s wall ({figures['alone_train_s']:.1f}s training); side by side "
        f"{figures['side_by_side_wall_s']:.1f}s ({figures['side_by_side_train_s']:.1f}s): ratio "
        f"{figures['wall_ratio_median']:.2f}x median, {figures['wall_ratio_worst']:.2f}x worst, training "
        f"{figures['train_ratio_median']:.2f}x; goal each within {GOAL}x: {verdict}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1) + "\n")


if __name__ == "__main__":
    main()
