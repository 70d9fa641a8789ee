"""Precision that fits the hardware (issue #24, points 1 and 2; issue 63, point 9): `trainer.amp=true` is fp32 on a
CPU (bf16 was measured slower there for lmpt's models), saying why; an explicit bf16/fp16 on a CPU that emulates it
runs with a warning naming the slowdown and shows no MFU figure; MFU is never above 100%. Both kinds of CPU are
covered by handing lmpt the other kind's feature flags (in process, and in a real `lmpt` run via the fault
runner); this machine's own flags are read from /proc/cpuinfo."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from golden import BASE, describe, records, run
from omegaconf import OmegaConf

from lmpt.train.loop import TrainLoop
from lmpt.train.precision import CPU_AMP_WHY, CPU_BF16_WIDTH, EMULATED_SLOWDOWN, Precision, cpu_flags, pick_precision

CPU = torch.device("cpu")
EPYC_AVX2 = frozenset({"fpu", "sse4_2", "avx", "avx2", "fma", "bmi2"})
"""An AMD EPYC of the kind the issue was found on: avx2 only."""
SAPPHIRE_RAPIDS = EPYC_AVX2 | {"avx512f", "avx512bw", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16"}
COOPER_LAKE = EPYC_AVX2 | {"avx512f", "avx512bw", "avx512_bf16"}


def trainer(amp: bool = False, precision: str | None = None):
    return OmegaConf.create({"amp": amp, "precision": precision})


def test_cpu_flags_are_read_from_cpuinfo(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512_bf16\n\nprocessor\t: 1\nflags\t\t: fpu avx2\n")
    assert cpu_flags(cpuinfo) == {"fpu", "avx2", "avx512_bf16"}
    (tmp_path / "arm").write_text("processor\t: 0\nFeatures\t: fp asimd\n")
    assert cpu_flags(tmp_path / "arm") is None  # no x86 flags: PyTorch's own query answers instead
    assert cpu_flags(tmp_path / "absent") is None


@pytest.mark.parametrize("flags", [EPYC_AVX2, COOPER_LAKE, SAPPHIRE_RAPIDS], ids=["avx2-only", "avx512_bf16", "amx"])
def test_amp_on_a_cpu_is_bf16_only_where_measured_faster_saying_why(flags, capsys) -> None:
    """bf16 was measured slower than fp32 below width 512 on a CPU with native bf16, and faster at 512 (issue 63,
    point 9): amp picks by the model's width, and the start line says why (Precision.why); a CPU without native bf16
    trains in fp32 and says it lacks it."""
    precision = pick_precision(trainer(amp=True), CPU, flags)
    assert (precision.name, precision.emulated) == ("fp32", False)
    out = capsys.readouterr().out
    if flags == EPYC_AVX2:  # one line saying why
        assert out.count("\n") == 1 and "trainer.amp=true runs in fp32" in out and "no native bf16" in out
        assert precision.why == "amp: this CPU has no native bf16"
    else:
        assert out == "" and precision.why == CPU_AMP_WHY
    assert pick_precision(trainer(precision="bf16"), CPU, flags).why == ""  # asked for: no reason to give
    wide = pick_precision(trainer(amp=True), CPU, flags, width=CPU_BF16_WIDTH)  # bf16 measured faster from there
    assert wide.name == ("fp32" if flags == EPYC_AVX2 else "bf16") and not wide.emulated
    assert pick_precision(trainer(amp=True), CPU, flags, width=CPU_BF16_WIDTH // 2).name == "fp32"


@pytest.mark.parametrize("name", ["bf16", "fp16"])
def test_explicit_emulated_precision_runs_with_a_warning(name: str, capsys) -> None:
    precision = pick_precision(trainer(precision=name), CPU, EPYC_AVX2)
    assert (precision.name, precision.emulated) == (name, True)
    out = capsys.readouterr().out
    assert "WARNING" in out and f"~{EMULATED_SLOWDOWN[name]}x slower than fp32" in out
    assert not pick_precision(trainer(precision=name), CPU, SAPPHIRE_RAPIDS).emulated
    assert capsys.readouterr().out == ""


def test_this_machine_is_judged_by_its_own_flags() -> None:
    flags = cpu_flags()
    if flags is not None:
        native = bool(flags & {"avx512_bf16", "amx_bf16"})
        assert pick_precision(trainer(precision="bf16"), CPU).emulated == (not native)
    assert pick_precision(trainer(amp=True), CPU).name == "fp32"
    assert not pick_precision(trainer(), CPU).emulated


def test_onednn_held_to_avx2_makes_this_machine_an_avx2_cpu() -> None:
    """`ONEDNN_MAX_CPU_ISA=AVX2` sends PyTorch's bf16 matmuls down the emulated path even on a CPU with avx512_bf16
    (how an AVX2-only CPU is reproduced on a newer one): lmpt then judges bf16 emulated too, so amp stays fp32 and
    Muon orthogonalises in float32, as they would on that CPU."""
    probe = (
        "import torch; from lmpt.train.precision import cpu_flags, emulates_bf16;"
        "flags = cpu_flags(); print(flags is None or 'avx512_bf16' not in flags, emulates_bf16(torch.device('cpu')))"
    )
    env = {**os.environ, "ONEDNN_MAX_CPU_ISA": "AVX2"}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "True"], out


def test_fp32_and_no_amp_never_warn(capsys) -> None:
    assert pick_precision(trainer(), CPU, EPYC_AVX2) == Precision("fp32", CPU, False)
    assert pick_precision(trainer(precision="fp32"), CPU, EPYC_AVX2).name == "fp32"
    assert capsys.readouterr().out == ""


def test_mfu_is_capped_by_the_fastest_rate_seen() -> None:
    """A measured peak is a lower bound of the device's: an interval faster than it raises it, so MFU stays <= 1."""
    loop = SimpleNamespace(precision=Precision("fp32", CPU), peak_flops=1e9)
    assert TrainLoop.mfu(loop, 5e8) == 0.5
    assert TrainLoop.mfu(loop, 2e9) == 1.0 and loop.peak_flops == 2e9
    assert TrainLoop.mfu(loop, 1e9) == 0.5
    assert TrainLoop.mfu(SimpleNamespace(precision=Precision("bf16", CPU, emulated=True), peak_flops=1e9), 2e9) is None


SHORT = [*BASE, "trainer.max_steps=4", "trainer.eval_every=0", "trainer.ckpt_every=0"]


@pytest.mark.soak  # the in-process tests cover the choice; CI runs the bf16 command below
def test_amp_on_an_avx2_cpu_trains_in_fp32_with_mfu_at_most_one(tmp_path: Path) -> None:
    result = run(tmp_path / "amp", [*SHORT, "trainer.amp=true"], LMPT_TEST_CPU_FLAGS=",".join(EPYC_AVX2))
    assert result.returncode == 0, describe(result)
    assert "trainer.amp=true runs in fp32: this CPU has no native bf16" in result.stdout
    flat = " ".join(result.stdout.split())  # the start line wraps at the console's width
    assert "fp32 on cpu" in flat and "MFU against the best torch.float32 matmul measured" in flat
    mfus = [r["mfu"] for r in records(tmp_path / "amp") if "mfu" in r]
    assert len(mfus) == 4 and all(0 < m <= 1 for m in mfus)


def test_explicit_bf16_on_an_avx2_cpu_warns_and_shows_no_mfu(tmp_path: Path) -> None:
    result = run(tmp_path / "bf16", [*SHORT, "trainer.precision=bf16"], LMPT_TEST_CPU_FLAGS=",".join(EPYC_AVX2))
    assert result.returncode == 0, describe(result)
    assert "WARNING trainer.precision=bf16: this CPU has no native bf16" in result.stdout
    assert f"~{EMULATED_SLOWDOWN['bf16']}x slower than fp32" in result.stdout
    assert "bf16 on cpu" in result.stdout and "no MFU: bf16 is emulated on this CPU" in result.stdout
    assert "mfu n/a (emulated precision)" in result.stdout and "mfu 0" not in result.stdout
    assert all(r["mfu"] is None for r in records(tmp_path / "bf16") if "mfu" in r)
