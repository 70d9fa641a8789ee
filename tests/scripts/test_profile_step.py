"""scripts/profile_step.py: a real run's steps profiled and split into the optimizer and the forward and backward
passes, each by kind of work; with --avx2 the run computes as an AVX2-only CPU does (Muon then orthogonalises in
float32, whose matmuls land in the optimizer's part)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TINY = ["tokenizer.vocab_size=512", "model.n_layers=1", "data.seq_len=32", "trainer.batch_size=4"]


def test_a_run_is_profiled_into_the_optimizer_and_the_passes_by_kind(tmp_path: Path) -> None:
    out = tmp_path / "step.json"
    command = [sys.executable, str(REPO / "scripts" / "profile_step.py"), *TINY, "--first=2", "--steps=2"]
    result = subprocess.run([*command, "--avx2", "--json", str(out)], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "ONEDNN_MAX_CPU_ISA=AVX2" in result.stdout and "| step |" in result.stdout
    parts = json.loads(out.read_text())
    assert parts["optimizer"]["matmuls"] > 0  # Muon's Newton–Schulz iteration
    passes = parts["forward and backward"]
    assert passes["matmuls"] > 0 and passes["attention"] > 0 and passes["log-softmax and loss"] > 0
    assert "attention" not in parts["optimizer"]


def test_a_window_before_the_first_step_is_refused(tmp_path: Path) -> None:
    command = [sys.executable, str(REPO / "scripts" / "profile_step.py"), "--first=0"]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 2 and "--first and --steps must be at least 1" in result.stderr
