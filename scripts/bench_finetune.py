"""Fine-tuning throughput of `lmpt-finetune` (examples/s of training steps, scoring excluded) for model presets.

Per preset, a run is pre-trained for one step by the real CLI (the weights do not change the speed), then
`lmpt.downstream.finetune.finetune` fine-tunes it (mode=full, one seed, a fixed number of steps) on a
two-class task built from the bundled corpora, alternating precisions in this one process (fp32, amp, fp32, amp, ...).
The figure is the median examples/s over the repeats and, above all, the amp/fp32 ratio measured side by side. `amp` is
the training loop's choice (lmpt.train.precision.pick_precision): the record says which precision it resolved to.

    python scripts/bench_finetune.py --models tiny,small --repeats 5 --json bench_finetune.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run from a checkout without installing
from lmpt.downstream.finetune import finetune  # noqa: E402
from lmpt.downstream.kinds.classification import ClassificationResult  # noqa: E402
from lmpt.downstream.labelled_files import TaskData  # noqa: E402
from lmpt.downstream.options import FinetuneOptions  # noqa: E402
from lmpt.rundir.trained import load_trained  # noqa: E402


def pretrain(root: Path, model: str, objective: str) -> Path:
    """A run of `model` pre-trained for one step (the shapes matter here, not the weights)."""
    run = root / f"{model}-{objective}"
    cmd = [
        sys.executable,
        "-m",
        "lmpt",
        f"model={model}",
        f"objective={objective}",
        "tokenizer.vocab_size=8000",
        "data.seq_len=128",
        "trainer.batch_size=2",
        "trainer.max_steps=1",
        "trainer.sample_tokens=0",
        "trainer.progress=plain",
        "trainer.eval_batches=1",
        f"hydra.run.dir={run}",
    ]
    subprocess.run(cmd, cwd=root, check=True, capture_output=True)
    return run


def make_task(root: Path, n: int) -> TaskData:
    """Lines of Tiny Shakespeare against lines of WikiText-2 (two classes), `n` of each in train and dev."""
    corpora = REPO / "lmpt" / "corpora"
    sources = {"shakespeare": "tinyshakespeare.txt", "wikipedia": "wikitext-2-valid.txt"}
    rows = []
    for label, name in sources.items():
        lines = [s.strip() for s in (corpora / name).read_text(encoding="utf-8").splitlines() if len(s.strip()) > 40]
        rows += [{"text": text, "label": label} for text in lines[:n]]
    path = root / "task.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows[::2] + rows[1::2]), encoding="utf-8")
    return TaskData(train=str(path), dev=str(path))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="tiny,small")
    parser.add_argument("--objective", default="mlm")
    parser.add_argument("--precisions", default="fp32,amp", help="fp32, amp, bf16 or fp16, comma-separated")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--compile", action="store_true", help="torch.compile as training does (compile=true)")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args()
    console, results = Console(), []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        os.environ.setdefault("LMPT_CACHE_DIR", str(root / "cache"))
        data = make_task(root, args.batch_size * args.steps)
        for model in args.models.split(","):
            trained = load_trained(pretrain(root, model, args.objective), args.device)
            rates: dict[str, list[float]] = {p: [] for p in args.precisions.split(",")}
            resolved: dict[str, str] = {}
            for _ in range(args.repeats):
                for precision in rates:
                    options = FinetuneOptions(
                        data=data,
                        mode="full",
                        seeds=1,
                        max_steps=args.steps,
                        batch_size=args.batch_size,
                        seq_len=args.seq_len,
                        amp=precision == "amp",
                        precision=None if precision in ("fp32", "amp") else precision,
                        compile=args.compile,
                        json=True,
                    )
                    out = ClassificationResult.of(finetune(trained, options))
                    assert out.examples_per_s is not None and out.precision is not None
                    rates[precision].append(out.examples_per_s)
                    resolved[precision] = out.precision
                    console.print(f"{model} {precision} ({out.precision}): {out.examples_per_s:.2f} examples/s")
            params = trained.model.num_parameters()
            for precision, values in rates.items():
                results.append(
                    {
                        "model": model,
                        "objective": args.objective,
                        "arch": trained.arch,
                        "parameters": params,
                        "precision": precision,
                        "resolved": resolved[precision],
                        "examples_per_s": values,
                        "median": statistics.median(values),
                        "ratio_to_first": statistics.median(values) / statistics.median(next(iter(rates.values()))),
                    }
                )
    table = Table(title=f"lmpt-finetune examples/s ({platform.processor() or platform.machine()}, {args.device})")
    for column in ("model", "params", "precision (resolved)", "median examples/s", "all runs", "ratio"):
        table.add_column(column)
    for r in results:
        table.add_row(
            r["model"],
            f"{r['parameters'] / 1e6:.1f}M",
            f"{r['precision']} ({r['resolved']})",
            f"{r['median']:.1f}",
            " ".join(f"{v:.1f}" for v in r["examples_per_s"]),
            f"{r['ratio_to_first']:.2f}",
        )
    console.print(table)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
