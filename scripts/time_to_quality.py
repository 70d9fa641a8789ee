"""Time to quality: wall time of a training recipe against the bits per byte it reaches on held-out text.

The bundled tiny-Shakespeare text is cut by position: the first 90% of its bytes (up to the blank line that ends
the speaker turn running at that point) is the training text, everything after it the held-out text, which no
run ever trains on (it is the run's validation text, never a training source, and the tokenizer is trained on the
training text alone). Each recipe is a list of lmpt overrides; it trains with `lmpt` as a user would, then
`lmpt-eval` scores every token of the held-out text (sliding windows) and bits per byte is total nats / ln 2 over
the held-out file's every byte (newlines included). Besides wall time, the CPU seconds of the `lmpt` process (user +
system): on a shared machine they move less with the load than wall time does.

Recipes run interleaved (A B A B ...) so they share the machine's load; the table gives medians. Caches (tokenizer
and token cache) are built once per recipe before timing (`lmpt-prepare`), so wall time is training alone plus
start-up, the same for every recipe.

With no --recipe it runs the issue-24 comparison: `before` (the default up to issue 24, spelled out as overrides)
against `after` (today's default, no overrides). The table's last columns give each recipe's wall time as a share of
the first recipe's, and whether it reached the first recipe's held-out bits per byte.

    python scripts/time_to_quality.py --rounds 2 --json ttq.json
    python scripts/time_to_quality.py --recipe base="" --recipe longer="trainer.max_steps=400" --rounds 1
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NoReturn

from rich.console import Console
from rich.table import Table

from lmpt.train.metrics import bits_per_byte

CORPUS = Path(__file__).resolve().parents[1] / "lmpt" / "corpora" / "tinyshakespeare.txt"
TRAIN_SHARE = 0.9
BEFORE_ISSUE_24 = (
    "optimizer=adamw data.seq_len=256 trainer.max_steps=300 scheduler.warmup_steps=50 scheduler.min_lr_ratio=0.1"
)
"""The default run up to issue 24: AdamW at 1e-3, 300 steps of 16 x 256 tokens, 50 warm-up steps, cosine to 0.1x."""


def split_corpus(out: Path, share: float = TRAIN_SHARE) -> tuple[Path, Path]:
    """Write train.txt (the first `share` of the bytes, to the end of the turn running there) and heldout.txt
    (the rest) under `out`; their concatenation is the corpus byte for byte."""
    data = CORPUS.read_bytes()
    cut = data.find(b"\n\n", int(len(data) * share))
    cut = len(data) if cut < 0 else cut + 2
    train, held = out / "train.txt", out / "heldout.txt"
    train.write_bytes(data[:cut])
    held.write_bytes(data[cut:])
    return train, held


def data_overrides(train: Path, held: Path) -> list[str]:
    return ["data=text", f"data.paths=[{train}]", f"data.val_paths=[{held}]", "data.documents=blank_line"]


def lmpt(*args: str, module: str = "lmpt") -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    result = subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, env=env)
    if result.returncode != 0:
        sys.exit(
            f"{module} {' '.join(args)} failed ({result.returncode}):\n{result.stdout[-3000:]}{result.stderr[-3000:]}"
        )
    return result


def run_recipe(overrides: list[str], data: list[str], held: Path, run_dir: Path) -> dict:
    """Train one recipe into `run_dir` and score the held-out text; wall time is the whole `lmpt` command."""
    started, cpu_before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    lmpt(*data, *overrides, f"hydra.run.dir={run_dir}", "trainer.progress=plain", "trainer.sample_tokens=0")
    wall, cpu_after = time.perf_counter() - started, resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu_after.ru_utime + cpu_after.ru_stime) - (cpu_before.ru_utime + cpu_before.ru_stime)
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    train_s = json.loads((run_dir / "status.json").read_text())["wall_s"]
    scored = json.loads(lmpt(str(run_dir), f"data={held}", "json=true", module="lmpt.downstream.eval_cli").stdout)
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "train_s": train_s,
        "steps": max(r["step"] for r in metrics),
        "first_loss": next(r["loss"] for r in metrics if "loss" in r),
        "last_loss": [r["loss"] for r in metrics if "loss" in r][-1],
        "heldout_tokens": scored["text_tokens"],
        "scored_tokens": scored["scored_tokens"],
        "heldout_loss": scored["loss"],
        "bpb": bits_per_byte(scored["nats"], held.stat().st_size),  # over the file's every byte, newlines included
        "bpb_sentences": scored["bits_per_byte"],
    }


def refuse(message: str) -> NoReturn:
    """One line on stderr and exit 2, before any work (as lmpt's own commands refuse bad input)."""
    print(f"time_to_quality: error: {message}", file=sys.stderr)
    sys.exit(2)


def parse_recipes(given: list[str]) -> dict[str, list[str]]:
    """NAME="override override ..." -> {NAME: [override, ...]}; a recipe without a name or '=' is refused."""
    recipes: dict[str, list[str]] = {}
    for recipe in given:
        name, sep, value = recipe.partition("=")
        if not sep:
            refuse(f"--recipe {recipe} has no '=': write NAME=\"override override ...\" (NAME= for the defaults)")
        if not name.strip() or " " in name:
            refuse(f'--recipe {recipe} has no name: write NAME="override override ..."')
        if name in recipes:
            refuse(f"two recipes named '{name}': give each --recipe a name of its own")
        recipes[name] = value.split()
    return recipes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--recipe", action="append", help='NAME="override override ..." (default: before and after)')
    parser.add_argument("--rounds", type=int, default=2, help="times each recipe runs, interleaved")
    parser.add_argument("--json", type=Path, help="write every run's figures here")
    parser.add_argument("--keep", type=Path, help="keep run directories under this folder")
    args = parser.parse_args()
    if args.rounds < 1:
        refuse(f"--rounds {args.rounds}: give at least 1 (times each recipe runs)")
    recipes = parse_recipes(args.recipe or [f"before={BEFORE_ISSUE_24}", "after="])
    console = Console(width=150)  # the table's ten columns, unwrapped in a log file too
    console.print(f"load before: {os.getloadavg()}")
    results: dict[str, list[dict]] = {name: [] for name in recipes}
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        train, held = split_corpus(root)
        data = data_overrides(train, held)
        for overrides in recipes.values():  # caches first: timing covers training, not tokenizer training
            lmpt(*data, *overrides, module="lmpt.prepare")
        for round_ in range(args.rounds):
            for name, overrides in recipes.items():
                figures = run_recipe(overrides, data, held, root / f"{name}-{round_}")
                results[name].append(figures)
                console.print(f"round {round_} {name}: {json.dumps({k: round(v, 4) for k, v in figures.items()})}")
    console.print(f"load after: {os.getloadavg()}")
    table = Table(title="time to quality (medians)", title_justify="left")
    columns = (
        "recipe",
        "runs",
        "steps",
        "wall s",
        "cpu s",
        "train s",
        "held-out bpb",
        "first -> last loss",
        "wall / first",
        "reaches first's bpb",
    )
    for column in columns:
        table.add_column(column, justify="left" if column == "recipe" else "right")
    medians = {name: {k: statistics.median(r[k] for r in runs) for k in runs[0]} for name, runs in results.items()}
    first = next(iter(medians.values()))
    for name, med in medians.items():
        table.add_row(
            name,
            str(len(results[name])),
            f"{med['steps']:.0f}",
            f"{med['wall_s']:.1f}",
            f"{med['cpu_s']:.1f}",
            f"{med['train_s']:.1f}",
            f"{med['bpb']:.4f}",
            f"{med['first_loss']:.2f} -> {med['last_loss']:.2f}",
            f"{med['wall_s'] / first['wall_s']:.2f}",
            "yes" if med["bpb"] <= first["bpb"] else "no",
        )
    console.print(table)
    if args.json:
        args.json.write_text(json.dumps({"recipes": recipes, "results": results}, indent=1))


if __name__ == "__main__":
    main()
