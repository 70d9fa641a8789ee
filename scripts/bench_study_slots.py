"""Wall time of a study run serially against the same study over 2 slots of 1 thread each, on 2 cores.

Both studies run as a user would start them (`python -m lmpt.study KEY=VALUE ...`), one after the other, each into a
fresh directory, with this process (and so every run) kept to the same 2 cores. The serial study runs one run at a
time (`study.slots=1`: the default, `auto`, is a slot per core), each taking its threads as lmpt alone does (both
cores, less any other work); the slotted study's runs each take one core and one thread (`study.slots=2
study.slot_device=cpu`). Each study has a cache directory of its own (LMPT_CACHE_DIR beside its study directory),
its tokenizer and token cache built before it is timed (`lmpt-prepare`): both pay training, scoring and start-up
only, and neither reads the untrained controls the other scored (lmpt keeps them in the cache directory).

With no keys it times the default study (conf/study.yaml: about 70 minutes serially on 2 cores); keys after `--`
scale it down, e.g. a quick comparison:

    python scripts/bench_study_slots.py -- study.objectives=[clm,mlm] study.seeds=[0] study.trials=2 \\
        study.budgets=[1e12flops]
    python scripts/bench_study_slots.py --dry   # the two commands it would time, and the cores it would use

It prints each study's wall time, the slotted one's as a share of the serial one's, and whether their final runs
reached the same validation losses (they train the same recipes; on different thread counts not bit for bit).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

SERIAL = ["study.slots=1"]
SLOTS = ["study.slots=2", "study.slot_device=cpu"]
DATA_KEYS = ("data", "data.", "tokenizer", "tokenizer.", "quality", "quality.")
"""The run keys the token cache is keyed by: handed to lmpt-prepare so it builds the cache the studies read."""


def study_command(directory: Path, keys: list[str], slotted: bool) -> list[str]:
    """The `lmpt-study` command of one timed study."""
    return [sys.executable, "-m", "lmpt.study", *keys, *(SLOTS if slotted else SERIAL), f"study.dir={directory}"]


def prepare_command(keys: list[str]) -> list[str]:
    """`lmpt-prepare` of the data the study trains on (the default study's WikiText-2 unless the keys say)."""
    data = [k for k in keys if k.split("=", 1)[0].lstrip("+~").startswith(DATA_KEYS)]
    return [sys.executable, "-m", "lmpt.prepare", *(data or ["data=wikitext"])]


def pick_cores(count: int = 2) -> list[int]:
    """The first `count` cores this process may run on."""
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < count:
        raise SystemExit(f"bench_study_slots: needs {count} cores, this process may run on {len(cores)}")
    return cores[:count]


def final_losses(directory: Path) -> dict[str, float | None]:
    """Each final run's val_loss as study.json records it."""
    record = json.loads((directory / "study.json").read_text())
    return {
        f"{name} {f['budget']} seed {f['seed']}": f["val_loss"]
        for name, objective in record["objectives"].items()
        for f in objective.get("finals", [])
    }


def time_study(command: list[str], env: dict[str, str]) -> float:
    """Run one study to its end; its wall time in seconds."""
    start = time.perf_counter()
    result = subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if result.returncode != 0:
        raise SystemExit(f"bench_study_slots: {' '.join(command)} exited {result.returncode}: {result.stderr[-2000:]}")
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=Path("bench-study-slots"), help="where both studies write")
    parser.add_argument("--dry", action="store_true", help="print the commands and cores; run nothing")
    parser.add_argument("keys", nargs="*", help="study and run keys handed to both studies (after --)")
    args = parser.parse_args(argv)
    cores = pick_cores()
    serial = study_command(args.dir / "serial", args.keys, slotted=False)
    slotted = study_command(args.dir / "slots", args.keys, slotted=True)
    print(f"cores: {','.join(map(str, cores))}")
    print(f"prepare: {' '.join(prepare_command(args.keys))}")
    print(f"serial: {' '.join(serial)}")
    print(f"2 slots of 1 thread: {' '.join(slotted)}")
    if args.dry:
        return
    os.sched_setaffinity(0, cores)  # every study and run below inherits the 2 cores
    env = {k: v for k, v in os.environ.items() if k not in ("LMPT_THREADS", "OMP_NUM_THREADS")}
    wall = {}
    for name, command, directory in (("serial", serial, args.dir / "serial"), ("2 slots", slotted, args.dir / "slots")):
        cache = directory.with_name(f"{directory.name}-cache")
        for folder in (directory, cache):
            shutil.rmtree(folder, ignore_errors=True)
        own = {**env, "LMPT_CACHE_DIR": str(cache.resolve())}
        subprocess.run(prepare_command(args.keys), env=own, check=True, stdout=subprocess.DEVNULL)
        wall[name] = time_study(command, own)
    for name, seconds in wall.items():
        print(f"{name:>8}: {seconds / 60:6.1f} min")
    print(f"2 slots take {wall['2 slots'] / wall['serial']:.2f}x the serial study's wall time")
    ours, theirs = final_losses(args.dir / "serial"), final_losses(args.dir / "slots")
    for run, loss in ours.items():
        print(f"  {run}: val_loss {loss} serial, {theirs.get(run)} in 2 slots")


if __name__ == "__main__":
    main()
