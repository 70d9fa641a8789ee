"""Weighted mixtures: windows drawn in proportion to the weights as a pure function of the sample index, each
source still covering its own windows; bad mixtures refused in one line."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from lmpt.config.schema import DataConfig, SourceConfig
from lmpt.config.validate import _validate_sources
from lmpt.data.corpus import TokenCorpus
from lmpt.data.mixture import BLOCK, MixtureSampler, resolve_sources
from lmpt.data.sampler import StepLayout
from lmpt.errors import LmptError

WEIGHTS = [0.55, 0.3, 0.1, 0.05]
SPANS = [(0, 640_000), (640_000, 700_000), (700_000, 1_000_000), (1_000_000, 1_000_640)]
W = 64


def _sampler(weights: list[float] = WEIGHTS, seed: int = 3, batch_size: int = 32) -> MixtureSampler:
    tokens = np.broadcast_to(np.uint16(9), (SPANS[-1][1],))
    offsets = np.array([0, SPANS[-1][1]], dtype=np.int64)
    corpus = TokenCorpus(tokens, offsets, offsets, np.array([0, 1], dtype=np.int64))
    names = [f"s{i}" for i in range(len(weights))]
    return MixtureSampler(corpus, SPANS[: len(weights)], weights, names, W, StepLayout(batch_size), seed)


def test_shares_match_the_weights_within_5_sigma_over_1e5_windows() -> None:
    sampler = _sampler()
    n = 123_457  # not a whole number of blocks, and far into the run
    source, _ = sampler.sources_of(10**9 + np.arange(n))
    for s, weight in enumerate(WEIGHTS):
        observed = int((source == s).sum())
        sigma = math.sqrt(n * weight * (1 - weight))
        assert abs(observed - n * weight) < 5 * sigma, (s, observed, n * weight, sigma)
        assert abs(observed - n * weight) <= 2 * n / BLOCK + 1  # dealt in blocks: far closer than chance
    starts = sampler.starts_of(10**9 + np.arange(4096))
    source, _ = sampler.sources_of(10**9 + np.arange(4096))
    lo, hi = np.array(SPANS)[source].T
    assert np.all((starts >= lo) & (starts + W <= hi))  # every window inside its own source's text


def test_each_source_takes_its_own_samples_in_order_and_covers_its_windows() -> None:
    sampler = _sampler()
    n = 20 * BLOCK
    source, own = sampler.sources_of(np.arange(n))
    for s in range(len(WEIGHTS)):
        mine = np.sort(own[source == s])
        assert np.array_equal(mine, np.arange(len(mine)))  # its k-th sample exactly once, none skipped
    smallest = sampler.parts[3]  # 9 windows: many epochs in 20 blocks, every window in each of them
    starts = np.sort(smallest.starts_of(np.arange(smallest.n_windows)) - SPANS[3][0])
    assert len(set(starts.tolist())) == smallest.n_windows == 9


def test_a_pure_function_of_seed_and_sample_index() -> None:
    a, b = _sampler(), _sampler()
    samples = np.array([5, 10**12, 77, 4096 * 3 + 1, 6])
    assert np.array_equal(a.starts_of(samples), b.starts_of(samples[::-1])[::-1])  # any order, no history
    assert np.array_equal(a.starts(7, 0), b.starts_of(b.sample_index(7, 0) + np.arange(32)))
    other = _sampler(seed=4)
    assert not np.array_equal(a.starts(7), other.starts(7))
    assert not np.array_equal(a.sources_of(np.arange(64))[0], other.sources_of(np.arange(64))[0])


def _sources(*sources: dict) -> DataConfig:
    return OmegaConf.structured(DataConfig(paths=[], sources=[SourceConfig(**s) for s in sources]))


@pytest.mark.parametrize(
    "source,message",
    [
        (
            {"name": "web", "paths": ["a"], "weight": 0.0},
            r"data.sources\[1\].weight=0.0 is invalid: it must be a posit",
        ),
        ({"name": "web", "paths": ["a"], "weight": -2}, r"data.sources\[1\].weight=-2.0 is invalid"),
        ({"name": "web", "paths": ["a"], "weight": float("nan")}, r"data.sources\[1\].weight=nan is invalid"),
        ({"name": "", "paths": ["a"]}, r"data.sources\[1\].name='' is invalid: it must be a unique label"),
        ({"name": "books", "paths": ["a"]}, r"data.sources\[1\].name='books' is invalid: it must be a unique label"),
        ({"name": "a b", "paths": ["a"]}, r"data.sources\[1\].name='a b' is invalid"),
    ],
)
def test_bad_weights_and_names_are_refused_at_start_up(source: dict, message: str) -> None:
    with pytest.raises(LmptError, match=message):
        _validate_sources(_sources({"name": "books", "paths": ["b"]}, source).sources)


def test_sources_resolve_their_files_or_say_which_source_is_wrong(tmp_path: Path) -> None:
    (tmp_path / "web.txt").write_text("Web text.\n")
    (tmp_path / "books.txt").write_text("Book text.\n")
    cfg = DataConfig(paths=[], sources=[SourceConfig("web", ["web.txt"], 2.0), SourceConfig("books", ["b*.txt"])])
    web, books = resolve_sources(cfg, tmp_path)
    assert (web.name, web.weight, web.train_paths, books.train_paths) == (
        "web",
        2.0,
        [tmp_path / "web.txt"],
        [tmp_path / "books.txt"],
    )
    cfg.sources[1].paths = ["code/*.jsonl.zst"]
    with pytest.raises(LmptError, match=r"data.sources\[1\] \(books\): data path not found: code/\*.jsonl.zst"):
        resolve_sources(cfg, tmp_path)
    cfg.sources[1].paths = ["web.txt"]
    with pytest.raises(LmptError, match=r"web.txt is in both data.sources\[0\] \(web\) and data.sources\[1\]"):
        resolve_sources(cfg, tmp_path)
    cfg.paths = ["web.txt"]
    with pytest.raises(LmptError, match="data.sources and data.paths/data.val_paths both name text"):
        resolve_sources(cfg, tmp_path)


def test_weights_near_the_float_limit_give_their_shares() -> None:
    """1e308 + 1e308 overflows a float: the shares are those of 1, 1, and the weights are valid."""
    huge_sources = [{"name": name, "paths": [name], "weight": 1e308} for name in ("a", "b")]
    _validate_sources(_sources(*huge_sources).sources)
    huge, equal = _sampler([1e308, 1e308]), _sampler([1.0, 1.0])
    samples = np.arange(3 * BLOCK)
    assert np.array_equal(huge.sources_of(samples)[0], equal.sources_of(samples)[0])
    assert np.array_equal(_sampler([1.7e308, 1e307]).before(1), _sampler([17.0, 1.0]).before(1))
