"""Numerics (issue #4, point 8): a non-finite loss skips its step, is reported, and too many in a row stop
the run (one line, exit 2) with its last good checkpoint intact; nothing non-finite is committed.
Portable checkpoints (point 10): no `_orig_mod.`/`module.` prefixes, even from a compiled model; every
file loads with map_location="cpu": weights as safetensors, the rest with weights_only=True."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from golden import BASE, assert_same, describe, golden_run, interrupted_run, records, run

from lmpt.rundir.checkpoint import manifest_problem
from lmpt.safe_files import load_file_by_suffix


def tensors(obj) -> list[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, dict):
        return [t for v in obj.values() for t in tensors(v)]
    if isinstance(obj, (list, tuple)):
        return [t for v in obj for t in tensors(v)]
    return []


def assert_all_finite(run_dir: Path) -> None:
    """Every committed checkpoint (and the final model) holds finite floating-point tensors only."""
    files = sorted((run_dir / "checkpoints").glob("step_*/*.*"))
    if (run_dir / "model.safetensors").exists():
        files.append(run_dir / "model.safetensors")
    assert files
    for path in (f for f in files if f.name != "manifest.json"):
        for t in tensors(load_file_by_suffix(path)):
            assert not t.is_floating_point() or bool(torch.isfinite(t).all()), f"non-finite tensor in {path}"


def nan_at(*steps: int) -> dict[str, str]:
    return {"LMPT_TEST_NAN_AT_STEPS": ",".join(map(str, steps))}


def test_nonfinite_steps_are_skipped_and_reported(tmp_path: Path) -> None:
    result = run(tmp_path / "run", BASE, **nan_at(3, 4))
    assert result.returncode == 0, describe(result)
    assert "step 3: non-finite gradient, step skipped" in result.stdout
    assert "step 4: non-finite gradient, step skipped" in result.stdout
    train = {r["step"]: r for r in records(tmp_path / "run") if "grad_norm" in r}
    assert sorted(train) == list(range(1, 17))
    for step in (3, 4):  # logged as skipped: no loss, a non-finite gradient norm (null in strict JSON)
        assert "loss" not in train[step] and train[step]["grad_norm"] is None, train[step]
    assert all(math.isfinite(r["loss"]) for s, r in train.items() if s not in (3, 4))
    assert_all_finite(tmp_path / "run")


def test_too_many_nonfinite_steps_stop_with_the_last_good_checkpoint_intact(tmp_path: Path, tmp_path_factory) -> None:
    run_dir = tmp_path / "run"
    args = [*BASE, "trainer.max_nonfinite_steps=3"]
    result = run(run_dir, args, **nan_at(*range(6, 17)))
    assert result.returncode == 2, describe(result)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("lmpt: error: 3 steps in a row had a non-finite loss"), lines
    assert "last good checkpoint is intact" in lines[0]
    (checkpoint,) = sorted((run_dir / "checkpoints").iterdir())
    assert checkpoint.name == "step_00000004" and manifest_problem(checkpoint) is None
    assert_all_finite(run_dir)
    assert not (run_dir / "model.safetensors").exists()
    # the same command without the fault resumes from that checkpoint and ends exactly as if nothing happened
    interrupted_run(tmp_path, args, [], name="run")
    assert_same(golden_run(tmp_path_factory.mktemp("golden"), BASE), run_dir, "after stopping on NaN")


def test_fp16_stops_on_persistent_nonfinite_losses_too(tmp_path: Path) -> None:
    """The GradScaler skips a non-finite step by itself; those steps still count, and the run still stops."""
    result = run(
        tmp_path / "run",
        [*BASE, "trainer.precision=fp16", "trainer.max_nonfinite_steps=3"],
        **nan_at(*range(2, 17)),
        LMPT_TEST_FAST_PEAK="1",
    )
    assert result.returncode == 2, describe(result)
    assert result.stderr.strip().startswith("lmpt: error: 3 steps in a row had a non-finite loss"), result.stderr
    assert "step 2: non-finite gradient, step skipped" in result.stdout
    assert not (tmp_path / "run" / "checkpoints").exists()  # nothing committed, nothing non-finite


@pytest.mark.soak  # CI: a shorter test covers the same promise; run with `pytest -m soak`
def test_compiled_run_writes_portable_checkpoints(tmp_path: Path, tmp_path_factory) -> None:
    run_dir = tmp_path / "compiled"
    args = [*BASE, "trainer.compile=true", "trainer.max_steps=2", "trainer.ckpt_every=1", "trainer.eval_every=0"]
    result = run(run_dir, args, timeout=600)
    assert result.returncode == 0, describe(result)
    plain = load_file_by_suffix(golden_run(tmp_path_factory.mktemp("golden"), BASE) / "model.safetensors")
    parts = [p for p in sorted((run_dir / "checkpoints").glob("step_*/*.*")) if p.name != "manifest.json"]
    files = [*parts, run_dir / "model.safetensors"]
    assert len(files) == 7
    for path in files:
        loaded = load_file_by_suffix(path)  # torch.load(weights_only=True) for .pt files
        assert all(t.device.type == "cpu" for t in tensors(loaded))
        if path.name == "model.safetensors":  # a checkpoint's weights or the final model's
            keys = list(loaded)
            assert not [k for k in keys if k.startswith(("_orig_mod.", "module.")) or "._orig_mod." in k], path
            assert sorted(keys) == sorted(plain), path  # the same names as an uncompiled model's
