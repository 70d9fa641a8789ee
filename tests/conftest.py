"""Shared fixtures: an isolated cache directory and token caches of the two bundled corpora."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from lmpt.config.schema import DataConfig, TokenizerConfig
from lmpt.data.cache import PreparedData, default_cache_root, prepare_corpora

SMALL_VOCAB = 1024  # trains in about a second on a bundled corpus


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The checkout's root directory."""
    return Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session", autouse=True)
def lmpt_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Point $LMPT_CACHE_DIR at a session temp dir so tests never touch ~/.cache/lmpt."""
    previous = os.environ.get("LMPT_CACHE_DIR")
    path = tmp_path_factory.mktemp("lmpt-cache")
    os.environ["LMPT_CACHE_DIR"] = str(path)
    yield path
    if previous is None:
        os.environ.pop("LMPT_CACHE_DIR", None)
    else:
        os.environ["LMPT_CACHE_DIR"] = previous


def _prepare(corpus: str, repo_root: Path) -> PreparedData:
    data = DataConfig(paths=[f"bundled:{corpus}"])
    return prepare_corpora(data, TokenizerConfig(vocab_size=SMALL_VOCAB), repo_root, default_cache_root(None))


@pytest.fixture(scope="session")
def shakespeare(lmpt_cache_dir: Path, repo_root: Path) -> PreparedData:
    """Tiny Shakespeare (a document per speaker turn, 5% held out) with a 1024-piece tokenizer."""
    return _prepare("tinyshakespeare.txt", repo_root)


@pytest.fixture(scope="session")
def wikitext(lmpt_cache_dir: Path, repo_root: Path) -> PreparedData:
    """WikiText-2 valid (a document per article, 5% held out) with a 1024-piece tokenizer."""
    return _prepare("wikitext-2-valid.txt", repo_root)


@pytest.fixture(autouse=True)
def console_on_stdout() -> Iterator[None]:
    """A command called in process with json=true sends the console to stderr until its run_command ends; a test
    that calls the command directly leaves it there, so every test starts and ends with the console on stdout."""
    from lmpt.console import console

    console.stderr = False
    yield
    console.stderr = False
