"""The scripts at the edges (issue 32): the chaos soak covers every objective lmpt trains, and time_to_quality
refuses a bad command line in one line with exit 2 (no traceback)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from lmpt.objectives.registry import OBJECTIVES

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
from chaos_harness.cases import CASES  # noqa: E402


def test_the_chaos_soak_has_a_case_for_every_objective(tmp_path: Path) -> None:
    for name in OBJECTIVES:
        assert name in CASES and f"objective={name}" in CASES[name].args(tmp_path), name


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rounds", "0"], "--rounds 0: give at least 1"),
        (["--recipe", "trainer.max_steps"], "--recipe trainer.max_steps has no '='"),
        (["--recipe", "=trainer.max_steps=4"], "has no name"),
        (["--recipe", "a=", "--recipe", "a=trainer.max_steps=4"], "two recipes named 'a'"),
    ],
)
def test_time_to_quality_refuses_a_bad_command_line_in_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "time_to_quality.py"), *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert message in done.stderr and done.stdout == ""
