"""The CPU cores this process may run on, and how many of them other work keeps busy: one count for every layer that
sizes work or reads load by it."""

from __future__ import annotations

import os
import time
from pathlib import Path

SAMPLE_S = 0.25
"""How long the cores' busy time is sampled for: long enough for a few scheduler ticks, short beside a run's start."""


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the platform tells it, else the machine's)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def core_groups(cores: list[int], n: int) -> list[list[int]]:
    """`cores` split into `n` contiguous groups as even as they can be (the first groups one larger)."""
    size, extra = divmod(len(cores), n)
    groups, start = [], 0
    for i in range(n):
        end = start + size + (i < extra)
        groups.append(cores[start:end])
        start = end
    return groups


def describe_cores(cores: list[int]) -> str:
    """A contiguous group of cores in words: "core 3", "cores 0-3"."""
    return f"core {cores[0]}" if len(cores) == 1 else f"cores {cores[0]}-{cores[-1]}"


def _cpu_jiffies(cpus: set[int]) -> tuple[int, int]:
    """(busy, total) clock ticks of `cpus` since boot, summed, from /proc/stat."""
    busy = total = 0
    for line in Path("/proc/stat").read_text().splitlines():
        name, *fields = line.split()
        if not name.startswith("cpu") or name == "cpu" or int(name[3:]) not in cpus:
            continue
        ticks = [int(f) for f in fields[:8]]  # user nice system idle iowait irq softirq steal
        total += sum(ticks)
        busy += sum(ticks) - ticks[3] - ticks[4]
    return busy, total


def _own_jiffies() -> int:
    """Clock ticks this process (all its threads) has run, from /proc/self/stat (utime + stime)."""
    fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def busy_cores(sample_s: float = SAMPLE_S) -> float | None:
    """How many of this process's usable cores other processes keep busy, measured over `sample_s` from the kernel's
    per-core counters (this process's own time taken out); without /proc, the 1-minute load average; None where the
    platform tells neither."""
    try:
        cpus = os.sched_getaffinity(0)
        busy0, total0 = _cpu_jiffies(cpus)
        own0 = _own_jiffies()
        time.sleep(sample_s)
        busy1, total1 = _cpu_jiffies(cpus)
        own1 = _own_jiffies()
    except (AttributeError, OSError, ValueError, IndexError):
        try:
            return os.getloadavg()[0]
        except (AttributeError, OSError):
            return None
    elapsed_per_core = (total1 - total0) / len(cpus)
    if elapsed_per_core <= 0:
        return None
    return max(0.0, (busy1 - busy0 - (own1 - own0)) / elapsed_per_core)
