"""Zero-shot scoring time of a decoder against an encoder of the same size (issue 31: an encoder's PLL scoring within
3x of a decoder's on the cloze task), both built in this process with random weights (the weights do not change the
time) on a tokenizer trained on the bundled Tiny Shakespeare:

- `cloze`: bundled:shakespeare-cloze by lmpt.downstream.likelihood, encoders by the conditional PLL of
each choice (the default: only the choice's tokens masked), copies batched across choices and questions;
- `cloze-whole`: the same with choice_pll="whole" (every token of context + choice masked in turn), encoder only,
  set against the cloze decoder;
- `blimp-fast`: bundled:blimp-fast by lmpt.downstream.likelihood (encoders batched across sentences).

Each figure is the median wall time over --repeats, decoder and encoder taking turns; the ratio is encoder / decoder
on the same task. The machine is taken as it is (threads: torch's setting, or --threads; the load average before
and after goes into the record).

    python scripts/bench_scoring.py --model tiny --batch-size 64 --threads 1 --json bench_scoring.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
from omegaconf import OmegaConf
from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parents[1]
TASKS = {
    "cloze": "shakespeare-cloze (multiple_choice, conditional PLL)",
    "cloze-whole": "shakespeare-cloze (multiple_choice, choice_pll=whole)",
    "blimp-fast": "blimp-fast (minimal_pairs)",
}
"""--tasks names and the table's rows."""
sys.path.insert(0, str(REPO))  # run from a checkout without installing
from lmpt.config.schema import DataConfig, ModelConfig, TokenizerConfig  # noqa: E402
from lmpt.data.cache import prepare_corpora  # noqa: E402
from lmpt.downstream.likelihood import evaluate_choices, evaluate_pairs  # noqa: E402
from lmpt.downstream.zero_shot_files import read_choice_task, read_pairs  # noqa: E402
from lmpt.model import build_model  # noqa: E402
from lmpt.rundir.trained import Trained  # noqa: E402


def build(model: str, arch: str, objective: str, tokenizer, device: str) -> Trained:
    """A randomly initialised model of preset `model` (conf/model/NAME.yaml) as a Trained run."""
    preset = OmegaConf.load(REPO / "conf" / "model" / f"{model}.yaml")
    cfg = OmegaConf.merge(OmegaConf.structured(ModelConfig), {k: v for k, v in preset.items() if k != "defaults"})
    torch.manual_seed(0)
    network = build_model(cfg, arch, tokenizer.vocab_size, tokenizer.special.pad).to(device).eval()
    return Trained(network, tokenizer, OmegaConf.create({}), arch, objective, Path("in-process"))


def timed(works: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Median seconds of each work over `repeats` rounds, the works taking turns in each round (a machine that
    slows down or speeds up meanwhile touches all of them alike)."""
    seconds: dict[str, list[float]] = {name: [] for name in works}
    for _ in range(repeats):
        for name, work in works.items():
            start = time.perf_counter()
            work()
            seconds[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in seconds.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny", help="a preset of conf/model/")
    parser.add_argument("--batch-size", type=int, default=64, help="rows (choices, or masked copies) per pass")
    parser.add_argument("--limit", type=int, default=None, help="score only the first N questions / pairs")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    parser.add_argument("--tasks", default=",".join(TASKS), help=f"comma-separated, of {', '.join(TASKS)}")
    args = parser.parse_args()
    tasks = args.tasks.split(",")
    if unknown := set(tasks) - set(TASKS):
        parser.error(f"--tasks: unknown {', '.join(sorted(unknown))}: use {', '.join(TASKS)}")
    if args.threads:
        torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.setdefault("LMPT_CACHE_DIR", str(Path(tmp) / "cache"))
        data = DataConfig(paths=["bundled:tinyshakespeare.txt"])
        tokenizer = prepare_corpora(data, TokenizerConfig(), REPO, Path(os.environ["LMPT_CACHE_DIR"])).tokenizer
    questions = read_choice_task("bundled:shakespeare-cloze")[: args.limit]
    pairs = read_pairs("bundled:blimp-fast")[: args.limit]
    models = {
        "decoder": build(args.model, "decoder", "clm", tokenizer, args.device),
        "encoder": build(args.model, "encoder", "mlm", tokenizer, args.device),
    }
    b = args.batch_size
    work: dict[str, Callable[[Trained], Callable[[], object]]] = {
        "cloze": lambda t: lambda: evaluate_choices(t, questions, b, True),
        "cloze-whole": lambda t: lambda: evaluate_choices(t, questions, b, True, choice_pll="whole"),
        "blimp-fast": lambda t: lambda: evaluate_pairs(t, pairs, b, True),
    }
    load_before = os.getloadavg()
    rows = []
    for task in tasks:
        arches = ["encoder"] if task == "cloze-whole" else ["decoder", "encoder"]
        seconds = timed({arch: work[task](models[arch]) for arch in arches}, args.repeats)
        rows.append({"task": TASKS[task], **{f"{arch}_s": s for arch, s in seconds.items()}})
    load_after = os.getloadavg()
    cloze_decoder = next((row["decoder_s"] for row in rows if row["task"] == TASKS["cloze"]), None)
    for row in rows:
        row.setdefault("decoder_s", cloze_decoder)  # cloze-whole is set against the cloze decoder
        row["encoder_over_decoder"] = row["encoder_s"] / row["decoder_s"] if row["decoder_s"] else None
    record = {
        "model": args.model,
        "batch_size": b,
        "limit": args.limit,
        "questions": len(questions),
        "pairs": len(pairs),
        "repeats": args.repeats,
        "threads": torch.get_num_threads(),
        "device": args.device,
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "torch": torch.__version__,
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "load_before": load_before,
        "load_after": load_after,
        "rows": rows,
    }
    table = Table(title=f"zero-shot scoring, {args.model} models, batch {b}, {record['threads']} thread(s)")
    for column in ("task", "decoder s", "encoder s", "encoder / decoder"):
        table.add_column(column, justify="left" if column == "task" else "right")
    for row in rows:
        ratio = row["encoder_over_decoder"]
        decoder = "-" if row["decoder_s"] is None else f"{row['decoder_s']:.2f}"
        table.add_row(row["task"], decoder, f"{row['encoder_s']:.2f}", "-" if ratio is None else f"{ratio:.1f}x")
    Console().print(table)
    Console().print(
        f"load average (1 min) {load_before[0]:.1f} before, {load_after[0]:.1f} after, {os.cpu_count()} cores"
    )
    if args.json:
        args.json.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
