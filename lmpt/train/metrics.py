"""Training metrics: sums kept on the device between logs, and the run's append-only metrics.jsonl."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import torch

from lmpt.objectives.base import Stats


class RunningStats:
    """Adds up (sum, count) pairs over micro-steps and steps without a device sync; read at log time."""

    def __init__(self) -> None:
        self.totals: dict[str, list[torch.Tensor]] = {}

    def add(self, stats: Stats) -> None:
        for name, (total, count) in stats.items():
            if name in self.totals:
                self.totals[name][0] += total.detach().float()
                self.totals[name][1] += count
            else:
                self.totals[name] = [total.detach().float().clone(), torch.as_tensor(count).clone()]

    def sum_over(self, ctx) -> None:
        """Add up every rank's sums and counts in place (a no-op in one process). Ranks may have seen
        different metrics (a denoiser absent from one rank's batch), so they first agree on the names."""
        if not ctx.enabled:
            return
        names = sorted(set().union(*ctx.all_gather_object(sorted(self.totals))))
        device = next(iter(self.totals.values()))[0].device if self.totals else None
        for name in names:
            if name not in self.totals:
                self.totals[name] = [torch.zeros((), device=device), torch.zeros((), dtype=torch.long, device=device)]
        for name in names:  # the same order on every rank
            for tensor in self.totals[name]:
                ctx.sum_(tensor)

    def merge(self, other: RunningStats) -> None:
        self.add({name: (total, count) for name, (total, count) in other.totals.items()})

    def means(self) -> dict[str, float]:
        return {name: (s / c.clamp(min=1)).item() for name, (s, c) in self.totals.items()}

    def count(self, name: str) -> int:
        return int(self.totals[name][1].item()) if name in self.totals else 0

    def reset(self) -> None:
        self.totals.clear()

    def state_dict(self) -> dict:
        return {name: [s.cpu(), c.cpu()] for name, (s, c) in self.totals.items()}

    def load_state_dict(self, state: dict, device: torch.device) -> None:
        self.totals = {name: [s.to(device), c.to(device)] for name, (s, c) in state.items()}


def perplexity(loss: float) -> float:
    return math.exp(loss) if loss < 700 else math.inf


class MetricsLog:
    """`metrics.jsonl`: one JSON object per logged step or evaluation, floats at full precision."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def truncate_after(self, step: int) -> None:
        """Drop records after `step` (written by a run that died before its next checkpoint), atomically."""
        if not self.path.exists():
            return
        kept = [line for line in self.path.read_text().splitlines() if line and json.loads(line)["step"] <= step]
        tmp = self.path.with_suffix(".jsonl.tmp")
        tmp.write_text("".join(line + "\n" for line in kept))
        os.replace(tmp, self.path)

    def write(self, record: dict) -> None:
        with open(self.path, "a") as f:
            f.write(json.dumps(record) + "\n")

    def records(self) -> list[dict]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines() if line]
