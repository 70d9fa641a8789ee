"""`lmpt-prepare` builds the tokenizer and token cache as `lmpt` would, without training or a run directory."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest
from runner import lmpt_env, run_lmpt

from lmpt.stopping import EXIT_PREEMPTED


def _prepare(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = lmpt_env(LMPT_CACHE_DIR=str(cwd / "cache"))
    return run_lmpt("tokenizer.vocab_size=1024", *args, cwd=cwd, env=env, command="lmpt-prepare")


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


def test_a_sigterm_a_library_turns_into_another_error_still_ends_as_stopped(monkeypatch, capsys) -> None:
    """SIGTERM can land while OmegaConf builds a config, whose cleanup then raises an AttributeError of its own in
    place of the handler's exception (seen once in the suite): the command still ends in its one line, status 75
    (EXIT_PREEMPTED, as every lmpt command a scheduler may requeue)."""
    from lmpt.prepare import cli

    def interrupted_in_a_library(task) -> None:
        try:
            signal.getsignal(signal.SIGTERM)(signal.SIGTERM, None)  # the handler main installed, as the signal runs it
        finally:
            raise AttributeError("'NoneType' object has no attribute '_invalidate_flags_cache'")

    monkeypatch.setattr(cli, "run_hydra_app", interrupted_in_a_library)
    monkeypatch.setattr("sys.argv", ["lmpt-prepare"])
    before = signal.getsignal(signal.SIGTERM)
    try:
        with pytest.raises(SystemExit) as ended:
            cli.main()
    finally:
        signal.signal(signal.SIGTERM, before)
    assert ended.value.code == EXIT_PREEMPTED
    assert capsys.readouterr().err.strip().splitlines() == [
        "lmpt-prepare: stopped by SIGTERM; run the same command to resume (what it finished is kept)"
    ]
