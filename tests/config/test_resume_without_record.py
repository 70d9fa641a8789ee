"""`lmpt trainer.resume=RUN` on a run directory that lost Hydra's record (.hydra/hydra.yaml): one line saying what
is missing and what to do, exit 2; a command that retypes the run's configuration still goes to the drift check."""

from __future__ import annotations

from pathlib import Path

import pytest
from runner import run_lmpt

from lmpt.config.resume import resumed_overrides
from lmpt.errors import LmptError


@pytest.fixture
def run(tmp_path: Path) -> Path:
    path = tmp_path / "run"
    path.mkdir()
    (path / "config.yaml").write_text("objective:\n  name: clm\nmodel:\n  arch: auto\n")
    return path


def test_resume_alone_names_the_missing_record(run: Path) -> None:
    with pytest.raises(LmptError, match=r"\.hydra/hydra\.yaml .* is missing; restore .*\.hydra from a copy"):
        resumed_overrides([f"trainer.resume={run}", "trainer.max_steps=9"])
    with pytest.raises(LmptError, match="retype the run's original overrides"):
        resumed_overrides([f"hydra.run.dir={run}"])


def test_a_retyped_command_is_left_to_the_drift_check(run: Path) -> None:
    retyped = [f"trainer.resume={run}", "objective=clm", "data.seq_len=64"]
    assert resumed_overrides(retyped) == retyped


def test_the_command_prints_one_line_and_exits_2(run: Path, tmp_path: Path) -> None:
    done = run_lmpt(f"trainer.resume={run}", cwd=tmp_path, timeout=120)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("lmpt: error: cannot resume"), done.stderr
    assert "ConfigKeyError" not in done.stderr
