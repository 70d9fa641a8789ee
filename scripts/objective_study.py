"""Which objective gives the better model? clm, mlm, span, prefix and ul2-mixture pre-trained at one equal FLOPs
budget on the bundled tiny Shakespeare, two pre-training seeds each, then scored downstream on the tasks built from
its held-out text (docs/tasks.md): shakespeare-order fine-tuned (every weight, 2 epochs, 3 seeds) and
shakespeare-cloze zero-shot. `lmpt -m` sweeps do the work (the `downstream=shakespeare` group scores every run when
it ends, lmpt-compare ranks them); this script then writes docs/objective_study_table.md (mean ± std over pre-training
seeds) and docs/objective_study.png (bars with error bars); docs/objective_study.md discusses them.

Usage: python scripts/objective_study.py [--sweep-dir multirun/objective-study] [--budget 1e12flops] [--reuse]
(--reuse: only read existing sweeps and write the docs.) About 25 CPU minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from lmpt.report.compare import compare  # noqa: E402
from lmpt.report.runs import RunSummary, find_runs  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
OBJECTIVES = ("clm", "mlm", "span", "prefix", "ul2-mixture")
SEEDS = (1, 2)
MODEL = ["model.d_model=64", "model.n_layers=2", "model.n_heads=2", "model.ffn_dim=192"]
COMMON = [
    "tokenizer.vocab_size=1024", "data.seq_len=128", "trainer.batch_size=16", *MODEL, "scheduler.warmup_steps=20",
    "trainer.eval_every=0", "trainer.eval_batches=8", "trainer.sample_tokens=0", "trainer.progress=plain",
    "downstream=shakespeare", "downstream.mode=full", "downstream.seeds=3", "downstream.epochs=2",
]  # fmt: skip
FIGURES = {
    "order dev accuracy (fine-tuned, 3 seeds)": "downstream/shakespeare-order/accuracy_mean",
    "order test accuracy (fine-tuned, 3 seeds)": "test_accuracy_mean",
    "cloze accuracy (zero-shot)": "downstream/shakespeare-cloze/accuracy",
    "cloze accuracy_norm (zero-shot)": "downstream/shakespeare-cloze/accuracy_norm",
}
CHANCE = {"order": 0.5, "cloze": 0.25}


def run_sweeps(sweep_dir: Path, budget: str) -> None:
    """One sweep over the objectives per pre-training seed, the seeds side by side (two processes), then one ranked
    table of every run (lmpt-compare, into the study directory)."""
    jobs = []
    for seed in SEEDS:
        command = [
            sys.executable, "-m", "lmpt", "-m", f"objective={','.join(OBJECTIVES)}", f"trainer.seed={seed}",
            f"trainer.budget={budget}", *COMMON, f"hydra.sweep.dir={sweep_dir / f'seed-{seed}'}",
        ]  # fmt: skip
        print("$ lmpt " + " ".join(command[4:]), flush=True)
        log = open(sweep_dir.parent / f"{sweep_dir.name}-seed-{seed}.log", "w")  # noqa: SIM115
        jobs.append(subprocess.Popen(command, env={**os.environ, "OMP_NUM_THREADS": "1"}, cwd=REPO, stdout=log,
                                     stderr=subprocess.STDOUT))  # fmt: skip
    if any(job.wait() != 0 for job in jobs):
        raise SystemExit(f"a sweep failed: see {sweep_dir.parent}/{sweep_dir.name}-seed-*.log")
    compare([sweep_dir], sweep_dir)


def figure(run: RunSummary, key: str) -> float | None:
    """A downstream figure from metrics.jsonl, or the test figure from RUN/downstream/shakespeare-order.json."""
    if key.startswith("downstream/"):
        return run.downstream.get(key)
    record = run.path / "downstream" / "shakespeare-order.json"
    return json.loads(record.read_text()).get(key) if record.exists() else None


def mean_std(values: list[float]) -> tuple[float, float]:
    return statistics.mean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def summarize(runs: list[RunSummary]) -> dict[str, dict[str, tuple[float, float, int]]]:
    """objective -> figure -> (mean, sample std over pre-training seeds, runs)."""
    table = {}
    for objective in OBJECTIVES:
        mine = [r for r in runs if r.objective == objective and r.status == "completed"]
        row = {}
        for name, key in {**FIGURES, "steps": "steps"}.items():
            values = [float(r.step) if key == "steps" else figure(r, key) for r in mine]
            values = [v for v in values if v is not None]
            if values:
                row[name] = (*mean_std(values), len(values))
        table[objective] = row
    return table


def write_plot(table: dict, path: Path, budget: str) -> None:
    panels = [name for name in FIGURES if "test" not in name]
    fig, axes = plt.subplots(1, len(panels), figsize=(15, 4.8), dpi=110)
    for ax, name in zip(axes, panels, strict=True):
        names = [o for o in OBJECTIVES if name in table[o]]
        means = [table[o][name][0] for o in names]
        stds = [table[o][name][1] for o in names]
        ax.bar(names, means, yerr=stds, capsize=5, color="tab:blue", alpha=0.8)
        chance = CHANCE["order" if name.startswith("order") else "cloze"]
        ax.axhline(chance, color="tab:red", linestyle="--", label=f"chance {chance:g}")
        ax.set_title(name, fontsize="medium")
        ax.set_ylim(0, max([*means, chance]) * 1.3)
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize="small", loc="lower right")
    axes[0].set_ylabel(f"mean ± std over {len(SEEDS)} pre-training seeds")
    fig.suptitle(f"downstream accuracy at one equal budget of {budget} training FLOPs (tiny Shakespeare)")
    fig.tight_layout()
    fig.savefig(path, format="png")
    plt.close(fig)


def write_markdown(table: dict, path: Path, budget: str, sweep_dir: Path) -> None:
    names = [*FIGURES, "steps"]
    lines = ["| objective | " + " | ".join(names) + " |", "| --- |" + " ---: |" * len(names)]
    for objective in OBJECTIVES:
        cells = []
        for name in names:
            if name not in table[objective]:
                cells.append("")
                continue
            mean, std, _ = table[objective][name]
            cells.append(f"{mean:.0f} ± {std:.0f}" if name == "steps" else f"{mean:.3f} ± {std:.3f}")
        lines.append(f"| {objective} | " + " | ".join(cells) + " |")
    summary = (sweep_dir / "compare.md").read_text() if (sweep_dir / "compare.md").exists() else ""
    command = f"python scripts/objective_study.py --budget {budget}"
    text = [
        "# Which objective gives the better model? A worked study",
        "",
        f"Made by `{command}`: per pre-training seed one sweep, `lmpt -m objective={','.join(OBJECTIVES)} "
        f"trainer.seed=SEED trainer.budget={budget} {' '.join(COMMON)}`, then `lmpt-compare` over both.",
        "",
        f"Mean ± sample standard deviation over {len(SEEDS)} pre-training seeds (each run's fine-tuned figure is "
        "itself the mean of 3 fine-tuning seeds). Chance: 0.5 (order), 0.25 (cloze).",
        "",
        *lines,
        "",
        "![downstream accuracy per objective](objective_study.png)",
        "",
        "## Every run, as `lmpt-compare` ranks them",
        "",
        summary,
    ]
    path.write_text("\n".join(text))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweep-dir", type=Path, default=REPO / "multirun" / "objective-study")
    parser.add_argument("--budget", default="1e12flops")
    parser.add_argument("--out", type=Path, default=REPO / "docs")
    parser.add_argument("--reuse", action="store_true", help="only read an existing sweep")
    args = parser.parse_args()
    if not args.reuse:
        args.sweep_dir.mkdir(parents=True, exist_ok=True)
        run_sweeps(args.sweep_dir, args.budget)
    table = summarize(find_runs([args.sweep_dir]))
    write_plot(table, args.out / "objective_study.png", args.budget)
    write_markdown(table, args.out / "objective_study_table.md", args.budget, args.sweep_dir)
    print((args.out / "objective_study_table.md").read_text())


if __name__ == "__main__":
    main()
