"""Throughput of the small models lmpt trains on a CPU, two ways of training each compared side by side: the fused
CPU head against PyTorch's unfused ops (`--compare head`, the default), or fp32 against bf16 (`--compare precision`).

Each model of the crossover ladder (widths 16, 32, 64 = micro, 128, at a 2,048-piece vocabulary), the tiny default
and, when named in `--models`, the small one trains `--steps` steps of clm (and mdlm with `--objectives clm,mdlm`) on
WikiText-2, one thread, as a real `lmpt` process; its tokens/s and MFU are the medians of the run's own logged
intervals after `--skip` steps. The two ways alternate run by run (fused, unfused, fused, ...), `--repeats` each, so
both see the same machine. The head runs fp32; the precisions run the fused head.

    python scripts/bench_small_models.py                       # about 6 minutes on one core
    python scripts/bench_small_models.py --objectives clm,mdlm --json small.json
    python scripts/bench_small_models.py --compare precision --models w16,w32,micro,w128,tiny,small

Run it on a quiet machine: nothing else heavy beside it (docs/benchmarks.md, "The small models").
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # lmpt from this checkout, as the runs take it
from lmpt.reproduce.crossover.plan import LADDER  # noqa: E402
from lmpt.reproduce.ladder import Shape  # noqa: E402

MODELS = {Shape(w).label: list(Shape(w).keys()) for w in LADDER} | {"tiny": ["model=tiny"], "small": ["model=small"]}
"""The ladder of lmpt.reproduce.crossover.plan (its shapes: a layer and a head per 32 dimensions, feed-forward 3 widths)
and the tiny and small models; all but tiny and small at a 2,048-piece vocabulary."""
VOCAB = {"tiny": [], "small": []}
WAYS = {"head": ("fused", "unfused"), "precision": ("bf16", "fp32")}
"""What `--compare` sets side by side: the first way is the ratio's numerator."""


def child(head: str, keys: list[str]) -> None:
    """Train in this process with the head asked for (the unfused one patched in where lmpt looks it up)."""
    if head == "unfused":
        import lmpt.model.head as head_module
        import lmpt.model.language_model as language_model
        import lmpt.objectives.mdlm as mdlm

        def unfused(hidden, weight, targets, excluded=None, uniform=True):  # the plain ops take no promise
            return head_module.unfused_rows_loss(hidden, weight, targets, excluded)

        for module in (head_module, language_model, mdlm):
            module.rows_loss = unfused
    from lmpt.cli import main

    sys.argv = ["lmpt", *keys]
    main()


def one_run(model: str, objective: str, way: str, steps: int, skip: int) -> dict[str, float]:
    head = way if way in WAYS["head"] else "fused"
    with tempfile.TemporaryDirectory() as folder:
        keys = [
            *([f"trainer.precision={way}"] if way in WAYS["precision"] else ["trainer.precision=fp32"]),
            f"objective={objective}",
            "data=wikitext",
            *MODELS[model],
            *VOCAB.get(model, ["tokenizer.vocab_size=2048"]),
            f"trainer.max_steps={steps}",
            "trainer.eval_every=0",
            "trainer.sample_tokens=0",
            "trainer.log_every=5",
            "trainer.progress=plain",
            f"hydra.run.dir={folder}/run",
        ]
        env = {**os.environ, "LMPT_THREADS": "1", "PYTHONPATH": str(REPO)}
        done = subprocess.run(
            [sys.executable, __file__, "--child", head, *keys], env=env, capture_output=True, text=True, cwd=folder
        )
        if done.returncode != 0:
            sys.exit(f"bench_small_models: {model} {objective} {way} failed: {done.stderr[-800:]}")
        records = [json.loads(line) for line in Path(folder, "run", "metrics.jsonl").read_text().splitlines()]
        timed = [r for r in records if "tokens_per_s" in r and r["step"] > skip]
        log = Path(folder, "run", "lmpt.log").read_text()
        parameters = log.split(" parameters)")[0].rsplit("(", 1)[-1]
        return {
            "tokens_per_s": statistics.median(r["tokens_per_s"] for r in timed),
            "mfu": statistics.median(r["mfu"] for r in timed),
            "flops_per_token": records[-1]["flops"] / records[-1]["tokens"],
            "parameters": parameters,  # type: ignore[dict-item]
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--objectives", default="clm")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--skip", type=int, default=15, help="steps left out of the medians (warm-up)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--compare", choices=sorted(WAYS), default="head")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args, rest = parser.parse_known_args()
    if args.child:
        child(args.child, rest)
        return
    first_way, second_way = WAYS[args.compare]
    rows, results = [], []
    for model in args.models.split(","):
        for objective in args.objectives.split(","):
            runs: dict[str, list[dict[str, float]]] = {first_way: [], second_way: []}
            for _ in range(args.repeats):
                for way in (first_way, second_way):
                    runs[way].append(one_run(model, objective, way, args.steps, args.skip))
            rate = {way: statistics.median(r["tokens_per_s"] for r in runs[way]) for way in runs}
            mfu = {way: statistics.median(r["mfu"] for r in runs[way]) for way in runs}
            first = runs[first_way][0]
            results.append({"model": model, "objective": objective, **{w: runs[w] for w in runs}})
            rows.append(
                f"| {model} | {objective} | {first['parameters']} | {first['flops_per_token'] / 1e6:.2f}M | "
                f"{rate[second_way]:,.0f} | {rate[first_way]:,.0f} | {rate[first_way] / rate[second_way]:.2f} | "
                f"{mfu[second_way]:.1%} | {mfu[first_way]:.1%} |"
            )
            print(rows[-1], flush=True)
    header = (
        f"| model | objective | parameters | FLOPs/token | tokens/s {second_way} | {first_way} | ratio | "
        f"MFU {second_way} | {first_way} |"
    )
    print("\n" + header)
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    print("\n".join(rows))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
