"""A real `lmpt-prepare` killed with kill -9 mid-build keeps its sealed shards and redoes only the rest; two
`lmpt-prepare prepare.shard=i/2` processes build the same cache as one process, and training on it gives the
same first losses."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from runner import SMALL, lmpt_command, lmpt_env, run_lmpt, train_losses

from lmpt.prepare.cli import parse_part

DATA = ["data=text", "data.paths=[corpus.txt]", "data.tokenize_workers=1"]


def _env(cwd: Path) -> dict[str, str]:
    env = lmpt_env(LMPT_CACHE_DIR=str(cwd / "cache"))
    return env


PREPARE = ["tokenizer.vocab_size=1024", *DATA]


def _command(*args: str) -> list[str]:
    """lmpt-prepare as a process of its own (builds side by side, a build killed)."""
    return lmpt_command(*PREPARE, *args, command="lmpt-prepare")


def _prepare(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return run_lmpt(*PREPARE, *args, cwd=cwd, env=_env(cwd), command="lmpt-prepare")


def _cache_bytes(cache_dir: Path) -> dict[str, bytes]:
    return {f.name: f.read_bytes() for f in sorted(cache_dir.glob("*.bin"))}


def _train(cwd: Path, name: str) -> dict[int, float]:
    run_dir = cwd / name
    steps = ["trainer.max_steps=3", "trainer.log_every=1", "trainer.eval_every=0", f"hydra.run.dir={name}"]
    done = run_lmpt(*SMALL, *DATA, *steps, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return train_losses(run_dir)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, bytes], dict[int, float]]:
    """A corpus, its cache built by one plain lmpt-prepare, and the first losses of a run on it; the cache's
    tokens are then removed (the tokenizer stays, so every later build uses the same one)."""
    cwd = tmp_path_factory.mktemp("prepare-shards")
    text = "".join(f"Speaker {i}:\nLine {i} of the play, said {i % 7} times. It ends here.\n\n" for i in range(4000))
    (cwd / "corpus.txt").write_text(text)
    first = _prepare(cwd)
    assert first.returncode == 0, first.stderr
    cache_dir = Path(re.search(r"^token cache: (.+)$", first.stdout, re.M).group(1))
    reference = _cache_bytes(cache_dir)
    losses = _train(cwd, "single")
    shutil.rmtree(cwd / "cache" / "tokens")
    return cwd, cache_dir, reference, losses


def test_two_parts_build_the_same_cache_and_train_the_same(built) -> None:
    cwd, cache_dir, reference, losses = built
    parts = [
        subprocess.Popen(
            _command("data.shard_docs=100", f"prepare.shard={i}/2"),
            cwd=cwd,
            env=_env(cwd),
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for i in range(2)
    ]
    outs = [p.communicate(timeout=300) for p in parts]
    assert [p.returncode for p in parts] == [0, 0], [err for _, err in outs]
    assert "part 0/2" in outs[0][0] and "part 1/2" in outs[1][0]
    assert _cache_bytes(cache_dir) == reference
    assert not any(p.name.endswith(".shards-100") for p in cache_dir.parent.iterdir())
    assert _train(cwd, "parts") == losses  # trains as if one process had built the cache


def test_a_killed_build_keeps_its_sealed_shards(built) -> None:
    cwd, cache_dir, reference, _ = built
    shutil.rmtree(cwd / "cache" / "tokens", ignore_errors=True)  # whatever another test built
    shards = cache_dir.parent / f"{cache_dir.name}.shards-20"
    build = subprocess.Popen(
        _command("data.shard_docs=20"), cwd=cwd, env=_env(cwd), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.time() + 120
    while len(list(shards.glob("shard-*/manifest.json"))) < 10 and build.poll() is None and time.time() < deadline:
        time.sleep(0.01)
    build.send_signal(signal.SIGKILL)
    build.wait(timeout=30)
    sealed = {m.parent.name: (m.stat().st_ino, m.stat().st_mtime_ns) for m in shards.glob("shard-*/manifest.json")}
    total = 4000 // 20  # a document per speaker turn (train and val alike), 20 to a shard
    assert 10 <= len(sealed) < total and not (cache_dir / "meta.json").exists()

    seen = {}
    again = subprocess.Popen(
        _command("data.shard_docs=20"),
        cwd=cwd,
        env=_env(cwd),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    while again.poll() is None:  # the kept shards' manifests, as long as the restarted build runs
        for name in sealed:
            manifest = shards / name / "manifest.json"
            try:
                seen[name] = (manifest.stat().st_ino, manifest.stat().st_mtime_ns)
            except OSError:
                pass  # the shards are removed once the cache is complete
        time.sleep(0.01)
    out, err = again.communicate()
    assert again.returncode == 0, err
    assert f"kept {len(sealed)} sealed shard(s) of an earlier build; tokenised {total - len(sealed)}" in out
    assert seen and all(seen[name] == sealed[name] for name in seen)  # kept as they were, not rewritten
    assert json.loads((cache_dir / "meta.json").read_text())["shards"] == total
    assert _cache_bytes(cache_dir) == reference


def test_a_malformed_part_is_refused_in_one_line(tmp_path: Path) -> None:
    assert [parse_part(text) for text in ("0/1", "2/8", "2/2", "1/0", "a/2", "-1/2", "1")] == [
        (0, 1),
        (2, 8),
        "2/2",
        "1/0",
        "a/2",
        "-1/2",
        "1",
    ]
    done = run_lmpt("prepare.shard=2/2", cwd=tmp_path, env=_env(tmp_path), command="lmpt-prepare")
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        "lmpt: error: prepare.shard=2/2 must be i/N with 0 <= i < N (for example prepare.shard=2/8)"
    ]
    assert not (tmp_path / "cache").exists()
