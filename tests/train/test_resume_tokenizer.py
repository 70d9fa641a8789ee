"""A run keeps its tokenizer (issue 14, point 1): resumed with its cache deleted, or with a cache holding
another tokenizer under the same key, the run uses the tokenizer in its own directory, rebuilds the token
cache with it, and its losses and weights continue bit for bit."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from golden import BASE, KILLED, assert_same, describe, golden_run, run, start_golden

from lmpt.config.schema import TokenizerConfig
from lmpt.data.sources import bundled_dir, iter_documents
from lmpt.tokenizer.train import MODEL_NAME, train_model

KILL = {"LMPT_TEST_KILL_AFTER_BACKWARD": "7"}  # past the checkpoint at step 4


def _finish(run_dir: Path, args: list[str], saved: bytes) -> str:
    result = run(run_dir, args)
    assert result.returncode == 0, describe(result)
    assert "resuming with the run's own tokenizer" in result.stdout and "training a" not in result.stdout
    assert (run_dir / "tokenizer.model").read_bytes() == saved, "the run's tokenizer was overwritten"
    return result.stdout


def _token_cache_fingerprints(cache: Path) -> set[str]:
    return {json.loads(m.read_text())["tokenizer_fingerprint"] for m in (cache / "tokens").glob("*/meta.json")}


@pytest.fixture(scope="module")
def gold(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("golden")


def test_resume_uses_the_runs_tokenizer_whatever_the_cache_holds(gold: Path, tmp_path: Path) -> None:
    start_golden(gold, BASE)
    cache = tmp_path / "cache"
    killed, args = tmp_path / "killed", [*BASE, f"data.cache_dir={cache}"]
    result = run(killed, args, **KILL)
    assert result.returncode == KILLED, describe(result)
    saved = (killed / "tokenizer.model").read_bytes()
    runs_fingerprint = hashlib.sha256(saved).hexdigest()

    # another node: neither the tokenizer nor the token cache is there
    first = tmp_path / "cache-deleted"
    shutil.copytree(killed, first)
    (cached,) = (cache / "tokenizers").glob(f"*/{MODEL_NAME}")
    shutil.rmtree(cache)
    out = _finish(first, args, saved)
    assert "tokenising" in out, "the token cache was not rebuilt"
    assert _token_cache_fingerprints(cache) == {runs_fingerprint}
    assert not (cache / "tokenizers").exists(), "a tokenizer was trained or cached on resume"
    assert_same(golden_run(gold, BASE), first, "resumed with the cache deleted")

    # the cache holds another tokenizer under the run's key (as an unseeded trainer left behind), and a
    # token cache made with it under the name the run's tokenizer would use
    second = tmp_path / "cache-of-another-tokenizer"
    shutil.copytree(killed, second)
    docs = lambda: iter_documents([bundled_dir() / "tinyshakespeare.txt"], "blank_line", "text")
    cached.parent.mkdir(parents=True)
    cached.write_bytes(train_model(TokenizerConfig(vocab_size=1024, model_type="bpe"), docs))
    (tokens,) = (cache / "tokens").iterdir()
    meta = json.loads((tokens / "meta.json").read_text())
    meta["tokenizer_fingerprint"] = hashlib.sha256(cached.read_bytes()).hexdigest()
    (tokens / "meta.json").write_text(json.dumps(meta))
    out = _finish(second, args, saved)
    assert "reusing token cache" not in out
    assert _token_cache_fingerprints(cache) == {runs_fingerprint}
    assert_same(golden_run(gold, BASE), second, "resumed beside a cache made with another tokenizer")
