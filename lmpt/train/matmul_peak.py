"""The matmul peak MFU divides by where no datasheet gives one (a CPU, an unlisted GPU): the best of several short
timings, cached per machine in the cache directory ($LMPT_CACHE_DIR or ~/.cache/lmpt), so that a run started on a
loaded machine is measured against what the machine does unloaded (a peak measured under load read 88-100% MFU).
A higher measurement replaces the cached one; a much lower one, or a load above the cores this process may use, is
said on the console: the machine is busy and the run's throughput and MFU are low."""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from lmpt.cores import usable_cores
from lmpt.train.measurement_cache import MeasurementCache

PEAKS = MeasurementCache(
    "matmul_peaks.json", "peaks", valid=lambda flops: isinstance(flops, (int, float)) and flops > 0, score=float
)
"""The cached peaks, in the cache directory: {"peaks": {machine key: FLOP/s}}."""

BUSY_SHARE = 0.7
"""A measurement below this share of the cached peak says the machine is busy (repeat timings vary by ~10%)."""

SIZES = (256, 512, 1024, 2048)
"""Square matmul sizes tried, growing while one product stays under TIMED_S."""

TIMED_S = 0.05
"""Seconds one product may take: the size stops growing before one would take longer (the next size is 8x the
work)."""

REPEATS, REPEAT_S = 5, 0.25
"""Timings taken at each size: REPEATS, or as many as fit in REPEAT_S (at least two), the best kept."""


def device_name(device_type: str) -> str:
    """The CPU's model name (Linux /proc/cpuinfo, else the platform's) or the GPU's name."""
    if device_type == "cuda":
        return torch.cuda.get_device_name()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_key(device_type: str, dtype: torch.dtype, threads: int | None = None) -> str:
    """What a peak depends on: the device's model, torch, the dtype and the threads a CPU matmul uses (`threads`;
    None: this process's)."""
    on = f" x {threads or torch.get_num_threads()} threads" if device_type == "cpu" else ""
    return f"{device_name(device_type)}{on} | {dtype} | torch {torch.__version__}"


def measure_matmul(device_type: str, dtype: torch.dtype) -> float:
    """FLOP/s of a square matmul in `dtype`, the best of several timings (a burst of load slows one, not all): the
    size grows while the next product would stay under TIMED_S, so a slow dtype (fp16 on a CPU) stops at the smallest
    size and the whole costs about a tenth of a second (a 1024-square product is as fast per FLOP as a 2048 one on a
    CPU, at an eighth of the time). Its own generator: measuring never moves the run's random streams."""
    generator = torch.Generator(device=device_type).manual_seed(0)
    best = 0.0
    for n in SIZES:
        a = torch.randn(n, n, generator=generator, device=device_type).to(dtype)
        b = torch.randn(n, n, generator=generator, device=device_type).to(dtype)
        a @ b  # warm-up
        timings: list[float] = []
        began = time.perf_counter()
        while len(timings) < REPEATS and (len(timings) < 2 or time.perf_counter() - began < REPEAT_S):
            start = time.perf_counter()
            a @ b
            if device_type == "cuda":
                torch.cuda.synchronize()
            timings.append(time.perf_counter() - start)
        best = max(best, 2 * n**3 / min(timings))
        if 8 * min(timings) > TIMED_S:  # the next size, twice the side, is eight times the work
            break
    return best


@dataclass(frozen=True)
class MatmulPeak:
    flops: float
    """The peak MFU divides by: the best this machine has shown (this measurement or a cached one)."""
    measured: float
    """This launch's measurement."""
    busy: str | None
    """Why the machine looks busy now, in words, or None."""


def busy_reason(measured: float, best: float, load: float | None, cores: int) -> str | None:
    """Why the machine looks busy: a 1-minute load above the `cores` this process may use, or a measurement below
    BUSY_SHARE of the machine's best; None when neither."""
    reasons = []
    if load is not None and load > cores:
        reasons.append(f"load {load:.1f} on {cores} core{'s' * (cores != 1)}")
    if measured < BUSY_SHARE * best:
        reasons.append(f"matmul at {measured / best:.0%} of this machine's best ({best / 1e9:,.0f} GFLOP/s)")
    return "; ".join(reasons) or None


def load_average() -> float | None:
    """The 1-minute load average, or None where the platform has none."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def matmul_peak(
    device_type: str,
    dtype: torch.dtype,
    cache: Path | None,
    measure: Callable[[str, torch.dtype], float] = measure_matmul,
    load: Callable[[], float | None] = load_average,
    cores: Callable[[], int] = usable_cores,
) -> MatmulPeak:
    """Measure the peak, compare it with the one cached in `cache` for this machine (None: no cache) and keep the
    higher; the CPU's load counts only on a CPU."""
    measured = measure(device_type, dtype)
    key = machine_key(device_type, dtype)
    best = max(measured, PEAKS.read(cache).get(key, 0.0))
    if measured >= best:
        PEAKS.keep(cache, key, measured)
    busy = busy_reason(measured, best, load() if device_type == "cpu" else None, cores())
    return MatmulPeak(best, measured, busy)
