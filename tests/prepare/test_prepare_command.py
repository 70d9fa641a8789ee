"""`lmpt-prepare` builds the tokenizer and token cache as `lmpt` would, without training or a run directory."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from runner import lmpt_env


def _prepare(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = lmpt_env(LMPT_CACHE_DIR=str(cwd / "cache"))
    command = [sys.executable, "-m", "lmpt.prepare", "tokenizer.vocab_size=1024", *args]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_prepare_builds_once_then_reuses_and_writes_no_run_directory(tmp_path: Path) -> None:
    text = "".join(f"Speaker {i}:\nA line of text number {i}, said twice. It ends here.\n\n" for i in range(3000))
    (tmp_path / "corpus.txt").write_text(text)
    first = _prepare(tmp_path, "data=text", "data.paths=[corpus.txt]")
    assert first.returncode == 0, first.stderr
    assert "tokenising" in first.stdout and "token cache: " in first.stdout
    cache = next(line for line in first.stdout.splitlines() if line.startswith("token cache: ")).split(": ")[1]
    assert (Path(cache) / "meta.json").is_file() and Path(cache).parent == tmp_path / "cache" / "tokens"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "corpus.txt"]  # no outputs/, no .hydra/

    again = _prepare(tmp_path, "data=text", "data.paths=[corpus.txt]")
    assert again.returncode == 0, again.stderr
    assert f"reusing token cache {cache}" in again.stdout.replace("\n", "") and "tokenising" not in again.stdout
