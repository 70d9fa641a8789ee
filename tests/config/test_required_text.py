"""data=text with no data.paths stops before anything runs, in one line naming the key: it used to train on the
bundled Shakespeare that DataConfig's default holds and exit 0."""

from __future__ import annotations

from pathlib import Path

from runner import run_lmpt


def test_data_text_without_paths_is_refused_in_one_line_and_writes_nothing(tmp_path: Path) -> None:
    done = run_lmpt("data=text", "trainer.max_steps=2", cwd=tmp_path, timeout=120)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "data.paths is empty" in done.stderr and list(tmp_path.iterdir()) == []
