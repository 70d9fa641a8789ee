"""The CPU's matmul peak, MFU's denominator: the best this machine has shown, cached per machine, so a launch on a
loaded machine is not measured against its own slowed peak (MFU read 88-100%); a busy machine is said. The
measurement and the load are injected: nothing here depends on this machine's speed or load."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest
import torch

import lmpt.train.metrics as efficiency
from lmpt.train.matmul_peak import PEAKS, machine_key, matmul_peak


def key() -> str:
    """This machine's fp32 key now: it names the thread count, which an earlier test in the same process (a command
    run in-process takes its threads) may have changed since this module was imported."""
    return machine_key("cpu", torch.float32)


def _peak(cache: Path | None, measured: float, load: float = 0.5, cores: int = 2):
    return matmul_peak("cpu", torch.float32, cache, measure=lambda *_: measured, load=lambda: load, cores=lambda: cores)


def test_a_lower_measurement_never_lowers_the_cached_peak_and_a_higher_one_replaces_it(tmp_path: Path) -> None:
    cache = tmp_path / "cache" / "matmul_peaks.json"  # its folder made on first use
    first = _peak(cache, 100e9)
    assert (first.flops, first.busy) == (100e9, None) and PEAKS.read(cache) == {key(): 100e9}
    loaded = _peak(cache, 40e9)
    assert (loaded.flops, loaded.measured) == (100e9, 40e9)  # MFU against what the machine does unloaded
    assert PEAKS.read(cache) == {key(): 100e9}
    assert "matmul at 40% of this machine's best (100 GFLOP/s)" in loaded.busy
    assert _peak(cache, 90e9).busy is None  # within the spread of repeat timings
    assert _peak(cache, 120e9).flops == 120e9 and PEAKS.read(cache) == {key(): 120e9}


def test_peaks_are_kept_per_dtype_and_thread_count() -> None:
    assert machine_key("cpu", torch.bfloat16) != key() and f"x {torch.get_num_threads()} threads" in key()


def test_a_load_above_the_usable_cores_says_busy(tmp_path: Path) -> None:
    assert _peak(tmp_path / "p.json", 100e9, load=3.9, cores=2).busy == "load 3.9 on 2 cores"
    assert _peak(tmp_path / "p.json", 100e9, load=1.9, cores=2).busy is None


def test_the_busy_machine_is_said_on_the_console(tmp_path: Path, monkeypatch, capsys) -> None:
    busy = functools.partial(matmul_peak, measure=lambda *_: 50e9, load=lambda: 3.9, cores=lambda: 2)
    monkeypatch.setattr(efficiency, "matmul_peak", busy)
    monkeypatch.setenv("LMPT_CACHE_DIR", str(tmp_path))
    efficiency.measured_matmul_peak.cache_clear()
    try:
        assert efficiency.peak_flops(torch.device("cpu"), torch.float32)[0] == 50e9
        assert "machine busy" not in capsys.readouterr().out  # sizing a run (a plan, a refusal) says nothing
        efficiency.say_if_busy(torch.device("cpu"), torch.float32)  # the run that trains says it, once
        efficiency.say_if_busy(torch.device("cpu"), torch.float32)
    finally:
        efficiency.measured_matmul_peak.cache_clear()  # later tests measure for real
    assert capsys.readouterr().out.count("machine busy: load 3.9 on 2 cores; throughput and MFU are low") == 1


@pytest.mark.parametrize("text", ["{not json", '{"peaks": [1, 2]}', '{"peaks": {"x": "fast"}}', "[]", ""])
def test_a_corrupt_cache_is_ignored_and_rewritten(tmp_path: Path, text: str) -> None:
    cache = tmp_path / "matmul_peaks.json"
    cache.write_text(text)
    assert _peak(cache, 80e9).flops == 80e9
    assert json.loads(cache.read_text()) == {"peaks": {key(): 80e9}}


def test_a_cache_that_cannot_be_written_costs_only_the_cache(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("a file where the cache folder would be")
    assert _peak(blocked / "matmul_peaks.json", 80e9).flops == 80e9
    assert _peak(None, 70e9).flops == 70e9
