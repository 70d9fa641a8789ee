"""The sample printed at the end of training marks where its prompt ends, in plain text too (logs, pipes)."""

from __future__ import annotations

from pathlib import Path

from runner import SMALL, run_lmpt


def test_the_sample_marks_the_end_of_its_prompt(tmp_path: Path) -> None:
    done = run_lmpt(*SMALL, "trainer.max_steps=2", f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    line = next(line for line in done.stdout.splitlines() if line.startswith("sample:"))
    prompt, marker, continuation = line.removeprefix("sample: ").partition(" \u27e9")
    assert marker and prompt.strip() and continuation, line
    assert "sample:" in (tmp_path / "run" / "lmpt.log").read_text()
