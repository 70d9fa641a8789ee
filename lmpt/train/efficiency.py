"""Model FLOPs utilisation and memory: what fraction of the hardware the run actually uses."""

from __future__ import annotations

import functools
import resource
from dataclasses import dataclass

import torch

from lmpt.console import info
from lmpt.train.matmul_peak import matmul_peak, peaks_file

ASSUMED_MFU = 0.4
"""Utilisation assumed for time estimates before a run has measured its own."""

DATASHEET_BF16_PEAK = {"H100": 989e12, "H200": 989e12, "A100": 312e12}
"""Dense bf16 FLOP/s (never the 2:4-sparse figure), by GPU name."""


BUSY: dict[tuple[str, torch.dtype], str] = {}
"""Why each measured peak's machine was busy, by (device type, dtype): said once a run trains (say_if_busy), never
while a command only plans or refuses."""


@functools.cache
def measured_matmul_peak(device_type: str, dtype: torch.dtype) -> float:
    """FLOP/s of a large square matmul in the run's dtype, the best this machine has shown (lmpt.train.matmul_peak:
    the best of several timings, cached per machine): the CPU has no datasheet figure to trust. Notes in BUSY when
    the machine is busy, as the run's throughput and MFU then read low."""
    peak = matmul_peak(device_type, dtype, peaks_file())
    if peak.busy:
        BUSY[(device_type, dtype)] = peak.busy
    return peak.flops


def say_if_busy(device: torch.device, dtype: torch.dtype) -> None:
    """Once per process, when the run's peak was measured on a busy machine: its throughput and MFU read low through
    no fault of its own."""
    busy = BUSY.pop((device.type, dtype), None)
    if busy:
        info(f"[yellow]machine busy: {busy}; throughput and MFU are low[/]")


def peak_flops(device: torch.device, dtype: torch.dtype) -> tuple[float, str]:
    """The denominator of MFU and where it came from."""
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        for key, flops in DATASHEET_BF16_PEAK.items():
            if key in name:
                return flops, f"{key} bf16 datasheet"
    return measured_matmul_peak(device.type, dtype), f"best {dtype} matmul measured on this {device.type}"


def peak_memory_mb(device: torch.device) -> float:
    """Peak allocated accelerator memory, or the process's peak resident memory on a CPU."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


@dataclass(frozen=True)
class StepCost:
    """The expected cost of one optimizer step (all processes), from which a budget's step count is derived."""

    tokens: float
    flops: float
    seconds: float

    def of(self, unit: str) -> float:
        return {"tokens": self.tokens, "flops": self.flops, "minutes": self.seconds / 60}[unit]


def training_flops(model, examples: int, loss_tokens: float, seq_len: int, target_len: int = 0) -> float:
    """Training FLOPs of `examples` examples whose output head ran on `loss_tokens` positions, by the model's own
    count (`flops_per_example`): the one FLOP figure behind MFU, budgets, metrics.jsonl and the dry-run plan."""
    positions = examples * (target_len or seq_len)
    return examples * model.flops_per_example(seq_len, target_len, min(1.0, loss_tokens / max(1, positions)))


def expected_step_cost(model, objective, examples: int, peak: float) -> StepCost:
    """Tokens, FLOPs and seconds (at ASSUMED_MFU of `peak`) one optimizer step of `examples` examples is expected
    to cost, the head counted on the objective's expected loss-bearing share of positions."""
    seq_len, target_len = objective.seq_len, objective.target_length
    loss_tokens = examples * (target_len or seq_len) * objective.expected_loss_fraction
    flops = training_flops(model, examples, loss_tokens, seq_len, target_len)
    return StepCost(tokens=examples * (seq_len + target_len), flops=flops, seconds=flops / (peak * ASSUMED_MFU))
