"""The helper of scripts/gpu_check.sh: each step's figure read from what the step left in its folder, the kill -9 and
resume comparison, nanoGPT's data and log, and the summary table (summary.md) at the end.

    python scripts/gpu_check.py figure KIND STEP_DIR        # after a step: STEP_DIR/result.json, one line printed
    python scripts/gpu_check.py resume STEP_DIR --kill-at N -- COMMAND...   # uninterrupted, killed, resumed
    python scripts/gpu_check.py nanogpt-data DIR            # DIR/data/gpu_check/{train,val}.bin, random tokens
    python scripts/gpu_check.py summary OUT                 # OUT/summary.md from every OUT/*/result.json

A step's folder holds its log (log.txt), its run directories and, once `figure` has read them, result.json:
{"step", "status" (ok / failed / timed out / skipped), "seconds", "figure"}. A figure that cannot be read is said
as such, never invented: the step is then "failed"."""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

RESULT = "result.json"
LOG = "log.txt"
NANOGPT_ITER = re.compile(r"iter (\d+): loss ([\d.]+), time ([\d.]+)ms")
NANOGPT_WARMUP_ITERS = 5
"""nanoGPT iterations left out of its median step time (compilation and warm-up)."""


def records(run: Path) -> list[dict]:
    """A run's metrics.jsonl, one dict a line."""
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]


def train_losses(run: Path) -> dict[int, float]:
    """The training loss at each logged step (the last record of a step wins: a resumed run logs it again)."""
    return {r["step"]: r["loss"] for r in records(run) if "loss" in r}


def warnings_in(log: str) -> list[str]:
    """The log's warning lines: lmpt's own (WARNING ...) and Python's (...Warning: ...)."""
    return [line for line in log.splitlines() if "WARNING" in line or re.search(r"\w+Warning\b", line)]


def lmpt_run_figure(step_dir: Path) -> str:
    """A training run's figure: its loss from first to last logged step, its held-out loss and its warnings."""
    run = step_dir / "run"
    status = json.loads((run / "status.json").read_text())
    if status.get("status") != "completed":
        raise ValueError(f"the run's status is {status.get('status')!r}")
    losses = train_losses(run)
    first, last = losses[min(losses)], losses[max(losses)]
    warned = warnings_in((step_dir / LOG).read_text())
    falls = "one logged step" if len(losses) == 1 else "falls" if last < first else "does NOT fall"
    said = f"{len(warned)} warning line{'s' * (len(warned) != 1)}"
    if warned:
        said += f" (first: {warned[0].strip()[:120]})"
    losses_said = f"loss {first:.3f} -> {last:.3f} ({falls}) over {status['step']} steps"
    return f"{losses_said}, val_loss {status['val_loss']:.3f}, {said}"


def bench_figure(step_dir: Path) -> str:
    """scripts/bench.py's records: tokens/s, MFU and the ratio to transformers for each system and shape."""
    parts = []
    for path in sorted(step_dir.glob("bench*.json")):
        for r in json.loads(path.read_text()):
            label = (r["system"] if r["system"] == "lmpt" else r["reference"]) + (" compiled" if r["compiled"] else "")
            text = f"{r['objective']} {r['precision']} seq {r['seq_len']} {label}: "
            text += f"{r['tokens_per_s']:,.0f} tok/s, MFU {r['mfu']:.1%}"
            if "ratio" in r:
                text += f", {r['ratio']:.2f}x HF eager"
            if "ratio_vs_compiled_hf" in r:
                text += f", {r['ratio_vs_compiled_hf']:.2f}x HF compiled"
            parts.append(text)
    if not parts:
        raise ValueError("no bench*.json records")
    return "; ".join(parts)


def nanogpt_figure(step_dir: Path) -> str:
    """nanoGPT's tokens/s from its own log: tokens per iteration over its median iteration time after warm-up."""
    log = (step_dir / LOG).read_text()
    tokens = re.search(r"tokens per iteration will be: ([\d,]+)", log)
    times = [float(m.group(3)) for m in NANOGPT_ITER.finditer(log) if int(m.group(1)) >= NANOGPT_WARMUP_ITERS]
    if tokens is None or not times:
        raise ValueError("no 'tokens per iteration' or no timed iterations in nanoGPT's log")
    per_iter = int(tokens.group(1).replace(",", ""))
    ms = statistics.median(times)
    how = f"{per_iter:,} tokens per iteration, median {ms:.1f} ms over {len(times)} iterations"
    return f"{per_iter / (ms / 1e3):,.0f} tok/s ({how})"


def resume_figure(step_dir: Path) -> str:
    """What `resume` found (it writes resume.json)."""
    found = json.loads((step_dir / "resume.json").read_text())
    if found["deterministic"]:
        verdict = "bit for bit" if found["bitwise"] else f"NOT bit for bit (largest difference {found['largest']:.3g})"
    else:
        verdict = f"largest loss difference {found['largest']:.3g}"
    where = f"killed at step {found['killed_at']}, resumed from step {found['resumed_from']}"
    return f"{where}: {verdict} over {found['steps']} steps"


FIGURES: dict[str, Callable[[Path], str]] = {
    "run": lmpt_run_figure,
    "bench": bench_figure,
    "nanogpt": nanogpt_figure,
    "resume": resume_figure,
}


def figure(kind: str, step_dir: Path, rc: int, seconds: float, timeout: float) -> dict:
    """The step's result.json: its status from the exit code (124: timed out; a missing figure: failed)."""
    result: dict = {"step": step_dir.name, "seconds": round(seconds, 1)}
    if (step_dir / "skipped").exists():
        result.update(status="skipped", figure=(step_dir / "skipped").read_text().strip())
    elif rc in (124, 137):
        result.update(status="timed out", figure=f"stopped after its {timeout:.0f} s limit")
    else:
        try:
            result["figure"] = FIGURES[kind](step_dir)
            result["status"] = "ok" if rc == 0 else "failed"
        except (OSError, ValueError, KeyError, IndexError, TypeError) as exc:
            result.update(status="failed", figure=f"exit {rc}; no figure: {exc}")
    if result["status"] == "failed":
        tail = [ln for ln in (step_dir / LOG).read_text(errors="replace").splitlines() if ln.strip()][-1:]
        result["figure"] += f" (last log line: {tail[0].strip()[:200]})" if tail else ""
    (step_dir / RESULT).write_text(json.dumps(result, indent=1) + "\n")
    return result


def wait_for_step(run: Path, step: int, process: subprocess.Popen, timeout: float) -> int:
    """Until `run` has logged a training loss at `step` or later; the step reached. Raises if the run ends first."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the run ended (exit {process.returncode}) before step {step}")
        try:
            reached = max(train_losses(run), default=-1)
        except (OSError, ValueError):  # not written yet, or a line half written
            reached = -1
        if reached >= step:
            return reached
        time.sleep(0.05)
    raise RuntimeError(f"no step {step} within {timeout:.0f} s")


def resume(step_dir: Path, kill_at: int, command: list[str]) -> int:
    """Run `command` to the end (run `full`), then again (run `killed`), killed with SIGKILL once it logged step
    `kill_at` and resumed by the same command; compare the training losses step by step and the last held-out loss.
    The command must log every step and checkpoint before `kill_at`. Writes resume.json."""
    deterministic = "trainer.deterministic=true" in command
    with (step_dir / LOG).open("a") as log:

        def launch(run: str) -> subprocess.Popen:
            log.write(f"$ {' '.join(command)} hydra.run.dir={step_dir / run}\n")
            log.flush()
            return subprocess.Popen(
                [*command, f"hydra.run.dir={step_dir / run}"], cwd=step_dir, stdout=log, stderr=subprocess.STDOUT
            )

        if launch("full").wait() != 0:
            raise SystemExit("the uninterrupted run failed: see log.txt")
        victim = launch("killed")
        killed_at = wait_for_step(step_dir / "killed", kill_at, victim, timeout=600)
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait()
        log.write(f"--- killed with SIGKILL at step {killed_at}\n")
        checkpoints = sorted((step_dir / "killed" / "checkpoints").glob("step_*"))
        resumed_from = int(checkpoints[-1].name.split("_")[1]) if checkpoints else 0
        if launch("killed").wait() != 0:
            raise SystemExit("the resumed run failed: see log.txt")
    full, resumed = train_losses(step_dir / "full"), train_losses(step_dir / "killed")
    if full.keys() != resumed.keys():
        raise SystemExit(f"the runs logged different steps: {sorted(full.keys() ^ resumed.keys())[:10]}")
    val = [json.loads((step_dir / run / "status.json").read_text())["val_loss"] for run in ("full", "killed")]
    differences = [abs(full[s] - resumed[s]) for s in full] + [abs(val[0] - val[1])]
    largest = max(differences)
    found = {
        "deterministic": deterministic,
        "killed_at": killed_at,
        "resumed_from": resumed_from,
        "steps": len(full),
        "bitwise": largest == 0.0,
        "largest": largest,
    }
    (step_dir / "resume.json").write_text(json.dumps(found, indent=1) + "\n")
    return 0 if found["bitwise"] or not deterministic else 1


def nanogpt_data(directory: Path, vocab: int = 50304, tokens: int = 2_000_000) -> None:
    """nanoGPT's data layout (data/gpu_check/train.bin and val.bin, uint16 token ids) with random tokens: its
    throughput does not depend on what the tokens say, and nothing has to be downloaded."""
    import numpy as np

    folder = directory / "data" / "gpu_check"
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for name, n in (("train.bin", tokens), ("val.bin", tokens // 10)):
        rng.integers(0, vocab, n, dtype=np.uint16).tofile(folder / name)


def summary(out: Path) -> str:
    """OUT/summary.md: one row per step, in the order they ran, and the device and date from OUT/device.txt."""
    results = [json.loads(p.read_text()) for p in out.glob(f"*/{RESULT}")]
    order = (out / "steps.txt").read_text().split() if (out / "steps.txt").exists() else []
    results.sort(key=lambda r: order.index(r["step"]) if r["step"] in order else math.inf)
    header = (out / "device.txt").read_text().strip() if (out / "device.txt").exists() else ""
    lines = ["# GPU check", "", header, "", "| step | status | seconds | figure |", "|---|---|---|---|"]
    lines += [f"| {r['step']} | {r['status']} | {r['seconds']} | {r['figure'].replace('|', '/')} |" for r in results]
    missing = [name for name in order if name not in {r["step"] for r in results}]
    lines += [f"| {name} | not run | | |" for name in missing]
    text = "\n".join(lines) + "\n"
    (out / "summary.md").write_text(text)
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    fig = sub.add_parser("figure", help="read a finished step's figure into its result.json")
    fig.add_argument("kind", choices=sorted(FIGURES))
    fig.add_argument("step_dir", type=Path)
    fig.add_argument("--rc", type=int, default=0)
    fig.add_argument("--seconds", type=float, default=0.0)
    fig.add_argument("--timeout", type=float, default=0.0)
    res = sub.add_parser("resume", help="a run, the same run killed with SIGKILL and resumed, compared")
    res.add_argument("step_dir", type=Path)
    res.add_argument("--kill-at", type=int, required=True)
    data = sub.add_parser("nanogpt-data", help="random-token train.bin and val.bin in nanoGPT's layout")
    data.add_argument("directory", type=Path)
    summ = sub.add_parser("summary", help="write OUT/summary.md and print it")
    summ.add_argument("out", type=Path)
    argv = sys.argv[1:] if argv is None else argv
    command = argv[argv.index("--") + 1 :] if "--" in argv else []  # the run's own command line, after --
    args = parser.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    if args.command == "figure":
        result = figure(args.kind, args.step_dir, args.rc, args.seconds, args.timeout)
        print(f"{result['step']}: {result['status']} ({result['seconds']} s): {result['figure']}")
        return 0
    if args.command == "resume":
        if not command:
            parser.error("resume needs the run's command after --")
        return resume(args.step_dir, args.kill_at, command)
    if args.command == "nanogpt-data":
        nanogpt_data(args.directory)
        return 0
    print(summary(args.out), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
