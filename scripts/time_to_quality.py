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

`--nanogpt PATH` (a nanoGPT checkout) puts nanoGPT's own CPU recipe first (its README's character-level Shakespeare
command, `train.py` run unmodified from a copy of the checkout) on the same cut: its train.bin is the training text,
its val.bin the held-out text, and its kept checkpoint is scored on every held-out byte as lmpt's runs are (sliding
windows of its 64-character context, each character scored once). Every lmpt recipe is then timed against nanoGPT's
quality: the table's last columns say which reach it, and in what share of nanoGPT's wall time.

`--cpu avx2` runs every recipe as an AVX2-only CPU computes (PyTorch's ATen, oneDNN and MKL held to AVX2, as
scripts/profile_step.py does); `--cpu both` runs each on this CPU and as AVX2, side by side in one run.

    python scripts/time_to_quality.py --rounds 2 --json ttq.json
    python scripts/time_to_quality.py --recipe base="" --recipe longer="trainer.max_steps=400" --rounds 1
    python scripts/time_to_quality.py --nanogpt ../nanoGPT --cpu both --recipe default= \
        --recipe 60-steps="trainer.max_steps=60 scheduler.warmup_steps=6" --rounds 2
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from profile_step import AVX2

CORPUS = Path(__file__).resolve().parents[1] / "lmpt" / "corpora" / "tinyshakespeare.txt"
TRAIN_SHARE = 0.9
BEFORE_ISSUE_24 = (
    "optimizer=adamw data.seq_len=256 trainer.max_steps=300 scheduler.warmup_steps=50 scheduler.min_lr_ratio=0.1"
)
"""The default run up to issue 24: AdamW at 1e-3, 300 steps of 16 x 256 tokens, 50 warm-up steps, cosine to 0.1x."""
NANOGPT_CPU = (
    "config/train_shakespeare_char.py --device=cpu --compile=False --eval_iters=20 --log_interval=1 --block_size=64 "
    "--batch_size=12 --n_layer=4 --n_head=4 --n_embd=128 --max_iters=2000 --lr_decay_iters=2000 --dropout=0.0"
).split()
"""nanoGPT's README recipe for a CPU ("about 3 minutes ... a loss of only 1.88")."""
NANOGPT_FILES = ("train.py", "model.py", "configurator.py", "config")
CPUS = {"native": {}, "avx2": AVX2}
"""Each CPU kind a recipe can run as: this CPU, or an AVX2-only one (the kernel libraries' limits)."""


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


def lmpt(*args: str, module: str = "lmpt", cpu: str = "native") -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **CPUS[cpu]}
    result = subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, env=env)
    if result.returncode != 0:
        sys.exit(
            f"{module} {' '.join(args)} failed ({result.returncode}):\n{result.stdout[-3000:]}{result.stderr[-3000:]}"
        )
    return result


def child_cpu_seconds() -> float:
    """User and system seconds of this process's finished children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_recipe(overrides: list[str], data: list[str], held: Path, run_dir: Path, cpu: str = "native") -> dict:
    """Train one recipe into `run_dir` and score the held-out text; wall time is the whole `lmpt` command."""
    started, cpu_before = time.perf_counter(), child_cpu_seconds()
    lmpt(*data, *overrides, f"hydra.run.dir={run_dir}", "trainer.progress=plain", "trainer.sample_tokens=0", cpu=cpu)
    wall, cpu_s = time.perf_counter() - started, child_cpu_seconds() - cpu_before
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    train_s = json.loads((run_dir / "status.json").read_text())["wall_s"]
    scored = json.loads(lmpt(str(run_dir), f"data={held}", "json=true", module="lmpt.downstream.eval_cli").stdout)
    return {
        "wall_s": wall,
        "cpu_s": cpu_s,
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


def nanogpt_data(train: Path, held: Path, data_dir: Path) -> list[int]:
    """nanoGPT's shakespeare_char files, as its prepare.py writes them (one id per character of the whole text,
    uint16, and meta.pkl with the vocabulary), but cut where lmpt's runs are cut: train.bin is the training text and
    val.bin the held-out text. Returns the held-out text's ids, which the checkpoint is scored on."""
    import pickle

    import numpy as np

    text = train.read_text() + held.read_text()
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    data_dir.mkdir(parents=True)
    ids = {name: [stoi[c] for c in source.read_text()] for name, source in (("train", train), ("val", held))}
    for name, split in ids.items():
        np.array(split, dtype=np.uint16).tofile(data_dir / f"{name}.bin")
    with open(data_dir / "meta.pkl", "wb") as meta:  # nanoGPT's own format: written here, read only by nanoGPT
        pickle.dump({"vocab_size": len(chars), "itos": dict(enumerate(chars)), "stoi": stoi}, meta)
    return ids["val"]


def nanogpt_heldout_nats(workdir: Path, held_ids: list[int]) -> float:
    """Total nats of nanoGPT's kept checkpoint over every held-out character after the first: windows of its
    block size, each character scored once, with the fullest context a window gives it."""
    import torch
    import torch.nn.functional as F

    sys.path.insert(0, str(workdir))
    from model import GPT, GPTConfig  # nanoGPT's model.py, from the copy that trained

    checkpoint = torch.load(workdir / "out-shakespeare-char" / "ckpt.pt", map_location="cpu", weights_only=True)
    model = GPT(GPTConfig(**checkpoint["model_args"]))
    model.load_state_dict({k.removeprefix("_orig_mod."): v for k, v in checkpoint["model"].items()})
    model.eval()
    block, ids, nats = model.config.block_size, torch.tensor(held_ids), 0.0
    stride = block // 2
    with torch.no_grad():
        for start in range(0, len(ids) - 1, stride):
            window = ids[start : start + block + 1]
            logits, _ = model(window[None, :-1], window[None, 1:])
            losses = F.cross_entropy(logits[0], window[1:], reduction="none")
            nats += float(losses[0 if start == 0 else block - stride :].sum())  # new characters only
            if start + block + 1 >= len(ids):
                break
    sys.path.remove(str(workdir))
    sys.modules.pop("model", None)
    return nats


def run_nanogpt(checkout: Path, train: Path, held: Path, workdir: Path, cpu: str = "native") -> dict:
    """nanoGPT's CPU recipe in a fresh copy of its checkout, trained on the training text; its kept checkpoint
    scored on every held-out byte. Wall time is the whole `python train.py ...` command."""
    import shutil

    workdir.mkdir(parents=True)
    for name in NANOGPT_FILES:
        copy = shutil.copytree if (checkout / name).is_dir() else shutil.copy2
        copy(checkout / name, workdir / name)
    held_ids = nanogpt_data(train, held, workdir / "data" / "shakespeare_char")
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **CPUS[cpu]}
    started, cpu_before = time.perf_counter(), child_cpu_seconds()
    result = subprocess.run(
        [sys.executable, "train.py", *NANOGPT_CPU], cwd=workdir, env=env, capture_output=True, text=True
    )
    wall, cpu_s = time.perf_counter() - started, child_cpu_seconds() - cpu_before
    if result.returncode != 0:
        sys.exit(f"nanoGPT's train.py failed ({result.returncode}):\n{result.stdout[-3000:]}{result.stderr[-3000:]}")
    losses = [
        float(line.split("loss ")[1].split(",")[0]) for line in result.stdout.splitlines() if line.startswith("iter ")
    ]
    nats = nanogpt_heldout_nats(workdir, held_ids)
    return {
        "wall_s": wall,
        "cpu_s": cpu_s,
        "train_s": wall,  # nanoGPT records no training time of its own: its whole command
        "steps": len(losses) - 1,
        "first_loss": losses[0],
        "last_loss": losses[-1],
        "heldout_tokens": len(held_ids),
        "scored_tokens": len(held_ids) - 1,
        "heldout_loss": nats / (len(held_ids) - 1),
        "bpb": bits_per_byte(nats, held.stat().st_size),
        "bpb_sentences": bits_per_byte(nats, held.stat().st_size),
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
    parser.add_argument("--nanogpt", type=Path, help="a nanoGPT checkout: its CPU recipe runs first, as the bar")
    parser.add_argument("--cpu", choices=["native", "avx2", "both"], default="native", help="the CPU kinds to run as")
    args = parser.parse_args()
    if args.rounds < 1:
        refuse(f"--rounds {args.rounds}: give at least 1 (times each recipe runs)")
    if args.nanogpt and not all((args.nanogpt / name).exists() for name in NANOGPT_FILES):
        refuse(f"--nanogpt {args.nanogpt} is not a nanoGPT checkout (no {', '.join(NANOGPT_FILES)}): clone it there")
    cpus = ["native", "avx2"] if args.cpu == "both" else [args.cpu]
    given = parse_recipes(args.recipe or [f"before={BEFORE_ISSUE_24}", "after="])
    recipes = {
        f"{name}@{cpu}" if len(cpus) > 1 else name: (cpu, overrides)
        for cpu in cpus
        for name, overrides in (({"nanogpt": None} if args.nanogpt else {}) | given).items()
    }
    console = Console(width=150)  # the table's ten columns, unwrapped in a log file too
    console.print(f"load before: {os.getloadavg()}")
    results: dict[str, list[dict]] = {name: [] for name in recipes}
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        train, held = split_corpus(root)
        data = data_overrides(train, held)
        for _cpu, overrides in recipes.values():  # caches first: timing covers training, not tokenizer training
            if overrides is not None:
                lmpt(*data, *overrides, module="lmpt.prepare")
        for round_ in range(args.rounds):
            for name, (cpu, overrides) in recipes.items():
                workdir = root / f"{name}-{round_}"
                if overrides is None:
                    figures = run_nanogpt(args.nanogpt, train, held, workdir, cpu)
                else:
                    figures = run_recipe(overrides, data, held, workdir, cpu)
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
    for name, med in medians.items():
        first = medians[next(n for n, (cpu, _) in recipes.items() if cpu == recipes[name][0])]  # same CPU kind
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
