"""How much to mask? The worked study of docs/mask_prob_study.md and docs/sweeps.md: the README's default run with
objective=mlm (the tiny encoder, 200 steps of 16 x 128 tokens of the bundled tiny-Shakespeare text) at mask rates 0.05,
0.15 and 0.4, each over pre-training seeds 0, 1 and 2, ranked by the masked-token loss at the shared 15% yardstick
with each rate's seeds pooled into one row (mean, std, 95% interval, Welch's t between neighbours).

It writes docs/mask_prob_study.md (the sweep's summary table, with a sentence saying whether 0.4 beats 0.15) and
docs/mask_prob_study.png (each rate's validation curve, the mean over its seeds).

Usage: python scripts/mask_prob_study.py [--sweep-dir DIR] [--reuse]
(--reuse: only read an existing sweep in DIR and write the docs.) Nine short runs: about 10 minutes on 2 idle CPU
cores.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # lmpt from this checkout, as the sweep runs it
from lmpt.downstream.significance import welch_t  # noqa: E402
from lmpt.report.ranking import rank_runs  # noqa: E402
from lmpt.report.runs import RunSummary, find_runs  # noqa: E402
from lmpt.report.seed_pool import SeedPool, pool_seeds  # noqa: E402
from lmpt.report.sweep import summary_files, write_report  # noqa: E402

DOC = REPO / "docs" / "mask_prob_study.md"
PLOT = DOC.with_suffix(".png")
RATES, SEEDS = "0.05,0.15,0.4", "0,1,2"
SWEEP = ["objective=mlm", f"objective.mask_prob={RATES}", f"trainer.seed={SEEDS}"]
TITLE = "mask rate 0.05, 0.15, 0.4 over seeds 0, 1, 2"  # no machine path: the title travels with the docs


def run_sweep(sweep_dir: Path) -> None:
    """`lmpt -m objective=mlm objective.mask_prob=0.05,0.15,0.4 trainer.seed=0,1,2` into `sweep_dir`."""
    command = [sys.executable, "-m", "lmpt", "-m", *SWEEP, "trainer.progress=plain", f"hydra.sweep.dir={sweep_dir}"]
    done = subprocess.run(command, cwd=sweep_dir.parent, env={**os.environ, "PYTHONPATH": str(REPO)})
    if done.returncode != 0:
        sys.exit(f"mask_prob_study: the sweep exited with {done.returncode}; run the same command to resume it")


def rate_of(row: RunSummary) -> str:
    """The row's objective.mask_prob, as its overrides name it."""
    return next(o.split("=", 1)[1] for o in row.overrides if o.startswith("objective.mask_prob="))


def finding(pool: SeedPool) -> str:
    """Whether 0.4 beats 0.15 on the ranked loss over their seeds: the table's own Holm-corrected Welch test when they
    are neighbours in it, else Welch's t over the two rates' seeds alone."""
    rows = {rate_of(r): r for r in pool.rows if r.members}
    high, mid = rows["0.4"], rows["0.15"]
    key = pool.ranking.key or "val_fixed_loss"
    loss = lambda row: pool.ranking.value(row)
    order = pool.significance.order
    upper, lower = sorted((high, mid), key=lambda r: order.index(id(r)))
    if order.index(id(lower)) == order.index(id(upper)) + 1:
        gap = pool.significance.gaps[id(upper)]
        p, test = gap.adjusted, "Holm-corrected Welch's t over the seeds, as the table's vs_next"
    else:
        p, test = welch_t(*(pool.significance.evidence[id(r)].seeds for r in (high, mid))), "Welch's t over the seeds"
    seeds = SEEDS.replace(",", ", ")
    figures = f"{loss(high):.4f} against {loss(mid):.4f} over seeds {seeds} ({test}: p={p:.2g})"
    if p is not None and p < 0.05:
        verdict = "beats" if loss(high) < loss(mid) else "loses to"
        return f"**0.4 {verdict} 0.15** on {key}, lower is better: {figures}."
    return (
        f"**0.4 and 0.15 cannot be told apart at 95%** on {key}, lower is better: {figures}; the spread over seeds "
        "covers the gap."
    )


COMPACT = (
    "run",
    "seeds",
    "val_fixed_loss",
    "val_fixed_loss_std",
    "val_fixed_loss_low",
    "val_fixed_loss_high",
    "vs_next",
    "val_fixed_acc",
    "flops",
)
"""The columns of the document's first table; the sweep's whole table follows at its end."""


def compact_table(table: list[str]) -> list[str]:
    """The rows of a Markdown table (header, rule, rows) cut to the COMPACT columns it has, in its order."""
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in table]
    keep = [i for i, name in enumerate(rows[0]) if name in COMPACT]
    return ["| " + " | ".join(row[i] for i in keep) + " |" for row in rows]


def write_docs(sweep_dir: Path) -> None:
    """docs/mask_prob_study.md and .png from the sweep in `sweep_dir`."""
    runs = find_runs([sweep_dir])
    ranked, ranking = rank_runs(runs)
    pool = pool_seeds(ranked, ranking)
    if pool is None:
        sys.exit(f"mask_prob_study: {sweep_dir} holds no setting over several seeds: run the sweep first")
    with tempfile.TemporaryDirectory() as scratch:
        files = summary_files(Path(scratch))
        write_report(runs, files, TITLE)
        table = [line for line in files.markdown.read_text().splitlines() if not line.startswith("![")]
        while table and not table[-1]:
            table.pop()
        shutil.copyfile(files.curves, PLOT)
    command = " ".join(["lmpt -m", *SWEEP])
    lines = [
        "# How much to mask? Three mask rates over three seeds",
        "",
        f"Written by `python scripts/mask_prob_study.py` from the sweep `{command}`: the README's default run",
        "(the tiny encoder, 200 steps of 16 x 128 tokens of the bundled tiny-Shakespeare text) with objective=mlm",
        "at each rate and seed. The sweep's own summary (summary.md in its directory) follows. Every job ran 200",
        "steps, so the rates did not spend equal compute: the output head runs only on the masked positions, so a",
        "higher rate spends more FLOPs per step (the `flops` column). It ran on a shared 2-core machine beside",
        "other jobs: the tokens/s and wall times are not speed figures.",
        "",
        finding(pool),
        "",
        *[line for line in table if not line.startswith("|")],
        "",
        *compact_table([line for line in table if line.startswith("|")]),
        "",
        f"![each rate's validation loss at the fixed 15% rate, the mean over its seeds]({PLOT.name})",
        "",
        "## Every column",
        "",
        *[line for line in table if line.startswith("|")],
    ]
    DOC.write_text("\n".join(lines) + "\n")
    print(f"wrote {DOC.relative_to(REPO)} and {PLOT.relative_to(REPO)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sweep-dir", type=Path, default=REPO / "multirun" / "mask-prob-study")
    parser.add_argument("--reuse", action="store_true", help="only read an existing sweep and write the docs")
    args = parser.parse_args()
    sweep_dir = args.sweep_dir.resolve()
    if not args.reuse:
        sweep_dir.parent.mkdir(parents=True, exist_ok=True)
        run_sweep(sweep_dir)
    write_docs(sweep_dir)


if __name__ == "__main__":
    main()
