"""Where one training step's time goes: an `lmpt` run (the default run unless keys are given) profiled by
torch.profiler over a window of its steps, the step split into the optimizer and the forward and backward passes,
and each into the kind of work (matmuls, attention, the loss's log-softmax, the rest).

    python scripts/profile_step.py                                   # the default run, steps 20-34
    python scripts/profile_step.py objective=mlm model=small --steps 5 --json step.json

An AVX2-only CPU (no avx512, no native bf16) is reproduced on a newer one by holding PyTorch's three kernel
libraries to AVX2: ATen (`ATEN_CPU_CAPABILITY=avx2`), oneDNN (`ONEDNN_MAX_CPU_ISA=AVX2`) and MKL
(`MKL_ENABLE_INSTRUCTIONS=AVX2`). ATen's alone leaves the matmuls on avx512 and bf16 native; `--avx2` sets all three.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

AVX2 = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}
"""The environment that makes PyTorch compute as an AVX2-only CPU does."""
MATMULS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")
KINDS: dict[str, Callable[[str], bool]] = {
    "matmuls": lambda name: name in MATMULS,
    "attention": lambda name: "scaled_dot_product" in name,
    "log-softmax and loss": lambda name: "log_softmax" in name or "nll_loss" in name or "CrossEntropy" in name,
}
"""Kinds of work by the profiler's op names (self time); everything else is "the rest". The fused CPU head
(lmpt.model.head.ChunkedCrossEntropy) counts its own bookkeeping as the loss and the matmuls and passes inside it
under their kinds."""


def breakdown(events: list, steps: int) -> dict[str, dict[str, float]]:
    """Milliseconds per step of each kind of work, inside the optimizer's step and outside it (forward, backward
    and the rest of the step), from the profiler's events (`prof.events()`)."""
    parts: dict[str, dict[str, float]] = {"optimizer": {}, "forward and backward": {}}
    for event in events:
        ancestor, in_optimizer = event.cpu_parent, False
        while ancestor is not None and not in_optimizer:
            in_optimizer, ancestor = ancestor.name.startswith("Optimizer.step#"), ancestor.cpu_parent
        part = parts[
            "optimizer" if in_optimizer or event.name.startswith("Optimizer.step#") else "forward and backward"
        ]
        kind = next((kind for kind, match in KINDS.items() if match(event.name)), "the rest")
        part[kind] = part.get(kind, 0.0) + event.self_cpu_time_total / 1e3 / steps
    return parts


def top_ops(events: list, steps: int, count: int) -> list[tuple[float, float, str, str]]:
    """The `count` ops with the most self time: (ms per step, calls per step, name, input shapes)."""
    time: dict[tuple[str, str], float] = {}
    calls: dict[tuple[str, str], int] = {}
    for event in events:
        key = (event.name, str(event.input_shapes))
        time[key] = time.get(key, 0.0) + event.self_cpu_time_total
        calls[key] = calls.get(key, 0) + 1
    ranked = sorted(time.items(), key=lambda kv: -kv[1])[:count]
    return [(us / 1000 / steps, calls[key] / steps, *key) for key, us in ranked]


def profile_run(keys: list[str], first: int, steps: int, top: int = 0) -> dict[str, dict[str, float]]:
    """Run `lmpt KEYS` in this process, profiling its steps first..first+steps-1; their breakdown (and with `top`,
    the ops with the most self time printed)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    import lmpt.train.loop as loop
    from lmpt.cli import main

    profiler = profile(activities=[ProfilerActivity.CPU], record_shapes=top > 0)
    train_step, done = loop.TrainLoop.train_step, {"steps": 0}
    result: dict[str, dict[str, float]] = {}

    def profiled_step(self, micro_batches):  # the loop's own step, inside the profiler's window
        done["steps"] += 1
        if done["steps"] == first:
            profiler.__enter__()
        grad_norm = train_step(self, micro_batches)
        if done["steps"] == first + steps - 1:
            profiler.__exit__(None, None, None)
            events = list(profiler.events())
            result.update(breakdown(events, steps))
            for ms, per_step, name, shapes in top_ops(events, steps, top):
                print(f"{ms:8.2f} ms {per_step:6.1f} calls  {name}  {shapes[:100]}")
            result["threads"] = {"intra-op": float(torch.get_num_threads())}
        return grad_norm

    loop.TrainLoop.train_step = profiled_step
    sys.argv = ["lmpt", f"trainer.max_steps={first + steps}", "trainer.eval_every=0", *keys]
    try:
        main()
    except SystemExit as stop:
        if stop.code:
            raise
    return result


def table(result: dict[str, dict[str, float]]) -> str:
    """The breakdown as a markdown table: ms per step per kind, per part, and the totals."""
    kinds = [*KINDS, "the rest"]
    parts = [p for p in result if p != "threads"]
    rows = ["| part | " + " | ".join(kinds) + " | total |", "| --- |" + " ---: |" * (len(kinds) + 1)]
    for part in parts:
        values = [result[part].get(kind, 0.0) for kind in kinds]
        rows.append(f"| {part} | " + " | ".join(f"{v:.1f}" for v in values) + f" | {sum(values):.1f} |")
    step = sum(sum(result[p].values()) for p in parts)
    rows.append(
        f"| step | {' | '.join(f'{sum(result[p].get(k, 0.0) for p in parts):.1f}' for k in kinds)} | {step:.1f} |"
    )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("keys", nargs="*", help="lmpt keys (default: none, the default run)")
    parser.add_argument("--first", type=int, default=20, help="the first profiled step (after warm-up)")
    parser.add_argument("--steps", type=int, default=15, help="steps profiled")
    parser.add_argument("--avx2", action="store_true", help="compute as an AVX2-only CPU does (see above)")
    parser.add_argument("--json", type=Path, help="write the breakdown (ms per step) here")
    parser.add_argument("--top", type=int, default=0, help="also print the N ops with the most self time, by shape")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.first < 1 or args.steps < 1:
        parser.error("--first and --steps must be at least 1")
    if not args.child:  # the kernel libraries read their limits at load: profile in a fresh process
        env = {**os.environ, **(AVX2 if args.avx2 else {})}
        command = [sys.executable, __file__, "--child", f"--first={args.first}", f"--steps={args.steps}"]
        command += [f"--top={args.top}", *args.keys]
        command += ["--json", str(args.json)] if args.json else []
        sys.exit(subprocess.run(command, env=env).returncode)
    result = profile_run(args.keys, args.first, args.steps, args.top)
    threads = int(result["threads"]["intra-op"])
    limits = ", ".join(f"{k}={os.environ[k]}" for k in AVX2 if k in os.environ) or "none"
    window = f"steps {args.first}-{args.first + args.steps - 1}"
    print(f"\nms of profiled work per step ({window}, {threads} threads; kernel limits: {limits})")
    print(table(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
