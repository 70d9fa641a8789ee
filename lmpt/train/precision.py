"""Device and numeric precision: which device, which autocast dtype, and whether a GradScaler runs."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

import torch

from lmpt.config.schema import TrainerConfig
from lmpt.console import info
from lmpt.errors import LmptError


def pick_device(requested: str) -> torch.device:
    kind = requested.split(":")[0]
    if kind == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    if kind == "cuda" and not torch.cuda.is_available():
        raise LmptError("trainer.device=cuda but no CUDA GPU is visible: use trainer.device=cpu (or auto)")
    if kind == "mps" and not torch.backends.mps.is_available():
        raise LmptError("trainer.device=mps but MPS is not available: use trainer.device=cpu (or auto)")
    return torch.device(requested)


NATIVE_CPU_FLAGS = {"bf16": ("avx512_bf16", "amx_bf16"), "fp16": ("avx512_fp16", "amx_fp16")}
"""/proc/cpuinfo flags any one of which gives a CPU native arithmetic in that dtype."""

EMULATED_SLOWDOWN = {"bf16": 28, "fp16": 100}
"""How many times slower than fp32 a training step runs where the CPU emulates the dtype: measured on a tiny clm
step (bf16 28x on an avx2-only AMD EPYC; fp16 about 100x with oneDNN off, the path such a CPU takes)."""

CPUINFO = Path("/proc/cpuinfo")


def cpu_flags(cpuinfo: Path = CPUINFO) -> frozenset[str] | None:
    """The CPU's feature flags from /proc/cpuinfo (x86 Linux), or None where there are none to read. From this
    machine's own /proc/cpuinfo, the bf16 flags count only where oneDNN, which runs PyTorch's bf16 matmuls on a CPU,
    may use them: `ONEDNN_MAX_CPU_ISA=AVX2` holds it below them, and this process then computes bf16 as an AVX2-only
    CPU does (emulated)."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return None
    flags = frozenset(word for line in text.splitlines() if line.startswith("flags") for word in line.split()[2:])
    if flags and cpuinfo == CPUINFO and not _onednn_bf16():
        flags -= frozenset(NATIVE_CPU_FLAGS["bf16"])
    return flags or None


def _onednn_bf16() -> bool:
    return torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported()


def native_on_cpu(name: str, flags: frozenset[str] | None) -> bool:
    """Whether this CPU computes `name` (bf16, fp16) natively: one of NATIVE_CPU_FLAGS in `flags`, or, where no
    flags could be read (not Linux), PyTorch's own cpuinfo query of the same instructions."""
    if name == "fp32":
        return True
    if flags is not None:
        return any(flag in flags for flag in NATIVE_CPU_FLAGS[name])
    if name == "bf16":
        return torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported()
    return torch.cpu._is_amx_fp16_supported()


def emulates_bf16(device: torch.device, flags: frozenset[str] | None = None) -> bool:
    """Whether bf16 arithmetic on `device` is emulated (a CPU without native bf16, `native_on_cpu`): slow.
    `flags`: the CPU's feature flags (default: read from /proc/cpuinfo)."""
    return device.type == "cpu" and not native_on_cpu("bf16", cpu_flags() if flags is None else flags)


@dataclass(frozen=True)
class Precision:
    name: str  # fp32 | bf16 | fp16
    device: torch.device
    emulated: bool = False
    """The device has no native arithmetic in this dtype (a CPU without avx512_bf16/AMX running bf16): slow, and
    no honest MFU can be given."""
    why: str = ""
    """Why trainer.amp chose this precision, in a few words for the start line ("" where it was asked for)."""

    @property
    def dtype(self) -> torch.dtype | None:
        return {"bf16": torch.bfloat16, "fp16": torch.float16}.get(self.name)

    def autocast(self) -> contextlib.AbstractContextManager:
        if self.dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.dtype)

    def grad_scaler(self) -> torch.amp.GradScaler:
        """fp16 always scales; bf16 and fp32 never do (a disabled scaler is a no-op)."""
        return torch.amp.GradScaler(self.device.type, enabled=self.name == "fp16")


CPU_BF16_WIDTH = 512
"""The narrowest model (model.d_model) trainer.amp=true trains in bf16 on a CPU with native bf16. Measured on an AMD
EPYC with avx512_bf16 (docs/benchmarks.md, "bf16 on a CPU"; scripts/bench_small_models.py --compare precision): bf16
ran at 0.43x to 1.01x fp32's tokens/s for widths 16 to 128 (the tiny model 0.95x; an Intel Xeon with AMX measured it
0.90x), and 1.46x for model=small (width 512). Widths between were not measured: fp32 there."""
CPU_AMP_WHY = f"amp: bf16 measured slower than fp32 on CPUs below width {CPU_BF16_WIDTH} (docs/benchmarks.md)"
"""Why trainer.amp=true trains a narrower model in fp32 on a CPU with native bf16 (trainer.precision=bf16 still asks
for bf16)."""
CPU_BF16_WHY = f"amp: bf16 measured 1.46x fp32 on a CPU at width {CPU_BF16_WIDTH} (docs/benchmarks.md)"
"""Why trainer.amp=true trains a model of CPU_BF16_WIDTH or wider in bf16 on a CPU with native bf16."""


def bf16_pays_on_cpu(width: int | None) -> bool:
    """Whether bf16 was measured faster than fp32 on a CPU with native bf16 for a model of `width` (model.d_model;
    None: unknown, so no): the one rule trainer.amp follows there, and a study's plan with it."""
    return width is not None and width >= CPU_BF16_WIDTH


def _lacks(name: str) -> str:
    return f"this CPU has no native {name} (none of {', '.join(NATIVE_CPU_FLAGS[name])} in /proc/cpuinfo)"


def pick_precision(
    trainer: TrainerConfig, device: torch.device, flags: frozenset[str] | None = None, width: int | None = None
) -> Precision:
    """`trainer.precision` wins; else `trainer.amp` means the fastest safe precision on the device: bf16 on a CUDA GPU
    that has it, fp16 (with a GradScaler) on older ones; on a CPU with native bf16, bf16 for a model of `width`
    (model.d_model) CPU_BF16_WIDTH or wider and fp32 below, where bf16 was measured slower (an unknown width: fp32);
    fp32 on a CPU without it (saying why). An explicit bf16/fp16 on a CPU that emulates it runs, with a
    warning naming the slowdown. `flags`: the CPU's feature flags (default: read from /proc/cpuinfo)."""
    on_cpu = device.type == "cpu"
    if on_cpu and flags is None:
        flags = cpu_flags()
    name: str | None = trainer.precision
    if name is None:
        if not trainer.amp:
            name = "fp32"
        elif device.type == "cuda":
            name = "bf16" if torch.cuda.is_bf16_supported() else "fp16"
        elif on_cpu and not native_on_cpu("bf16", flags):
            slowdown = EMULATED_SLOWDOWN["bf16"]
            info(f"trainer.amp=true runs in fp32: {_lacks('bf16')}; emulated bf16 would be ~{slowdown}x slower")
            return Precision("fp32", device, False, "amp: this CPU has no native bf16")
        elif on_cpu and not bf16_pays_on_cpu(width):
            return Precision("fp32", device, False, CPU_AMP_WHY)
        elif on_cpu:
            return Precision("bf16", device, False, CPU_BF16_WHY)
        else:
            name = "bf16"
    emulated = on_cpu and not native_on_cpu(name, flags)
    if emulated:
        info(
            f"[bold yellow]WARNING[/] trainer.precision={name}: {_lacks(name)}, so it is emulated: expect steps "
            f"~{EMULATED_SLOWDOWN[name]}x slower than fp32 and no MFU figure (trainer.precision=fp32 avoids it)"
        )
    return Precision(name, device, emulated)
