"""Weighted mixtures: the sources a run names, and which source each training sample comes from.

Samples are dealt in blocks of BLOCK: block b gives source s exactly N_s(b+1) - N_s(b) of its slots, where
N_s(b) = floor(b * BLOCK * share_s) in exact integer arithmetic, and a keyed Feistel permutation of the block
decides which slots. Every quantity is a pure function of (seed, sample index): resume needs no replay,
memory is O(number of sources), and each source's k-th sample is its own sampler's k-th window (each source
still visits every one of its windows once per its own epoch)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from lmpt.config.schema import DataConfig
from lmpt.data.corpus import TokenCorpus
from lmpt.data.permutation import FeistelPermutation
from lmpt.data.sampler import Span, StepLayout, StepSamples, WindowSampler
from lmpt.data.sources import resolve_paths
from lmpt.errors import LmptError
from lmpt.rng import derive_seed

if TYPE_CHECKING:
    from lmpt.data.readers.hf import HubDataset

BLOCK = 4096
_SCALE = 1 << 48  # shares as integers: the cumulative counts are exact, whatever the weights
_HUGE = 1e300  # weights above this are scaled down before summing (1e308 + 1e308 overflows)


@dataclass(frozen=True)
class Source:
    """One source of a run's text, its files resolved."""

    name: str
    weight: float
    train_paths: list[Path]
    val_paths: list[Path]
    documents: str
    dataset: HubDataset | None = None
    """data=hf: the dataset streamed instead of files (then `train_paths` and `val_paths` are empty)."""


def _resolved(paths: list[str], what: str, base_dir: Path) -> list[Path]:
    try:
        return resolve_paths(paths, base_dir) if paths else []
    except LmptError as e:
        raise LmptError(f"{what}: {e}") from None


def resolve_sources(cfg: DataConfig, base_dir: Path) -> list[Source]:
    """The run's sources: data.sources when given (a mixture), data.name's dataset (data=hf, opened here: one that
    cannot be is refused before anything is written), else one unnamed source of data.paths."""
    if cfg.name is not None:
        from lmpt.data.readers.hf import open_dataset, require_text_field  # `datasets` only for data=hf

        dataset = open_dataset(cfg.name, cfg.subset, cfg.split, cfg.revision, base_dir)
        require_text_field(dataset, cfg.text_field)
        return [Source("", 1.0, [], [], cfg.documents, dataset)]
    if not cfg.sources:
        train = resolve_paths(list(cfg.paths), base_dir)
        val = resolve_paths(list(cfg.val_paths), base_dir) if cfg.val_paths else []
        overlap = set(train) & set(val)
        if overlap:
            raise LmptError(f"{sorted(overlap)[0]} is in both data.paths and data.val_paths: list it in one only")
        return [Source("", 1.0, train, val, cfg.documents)]
    if cfg.paths or cfg.val_paths:
        raise LmptError(
            "data.sources and data.paths/data.val_paths both name text: give each source its paths and set "
            "data.paths=[] (data=mixture does)"
        )
    sources, owner = [], dict[Path, str]()
    for i, s in enumerate(cfg.sources):
        where = f"data.sources[{i}] ({s.name})"
        train = _resolved(list(s.paths), where, base_dir)
        if not train:
            raise LmptError(f"{where} has no paths: give it the files of its text")
        val = _resolved(list(s.val_paths), where, base_dir)
        for path in train + val:
            if path in owner:
                raise LmptError(f"{path} is in both {owner[path]} and {where}: list each file in one source only")
            owner[path] = where
        sources.append(Source(s.name, float(s.weight), train, val, s.documents or cfg.documents))
    return sources


def share_bounds(weights: list[float]) -> list[int]:
    """Cumulative shares of positive finite `weights` in units of 1/_SCALE, from 0 to _SCALE exactly."""
    top = max(weights)
    if top > _HUGE:  # near the float limit the sum overflows: the same shares from weights scaled down
        weights = [w / top for w in weights]
    total = math.fsum(weights)
    running, bounds = 0.0, [0]
    for w in weights:
        running += w
        bounds.append(round(running / total * _SCALE))
    bounds[-1] = _SCALE
    return bounds


class MixtureSampler(StepSamples):
    """Training windows drawn from several spans of one corpus in proportion to `weights`."""

    def __init__(
        self,
        corpus: TokenCorpus,
        spans: list[Span],
        weights: list[float],
        names: list[str],
        window_length: int,
        layout: StepLayout,
        seed: int,
    ) -> None:
        super().__init__(layout, seed)
        self.corpus = corpus
        self.window_length = window_length
        self.names = names
        single = StepLayout(layout.batch_size)  # a source's sampler only maps its own sample indices to windows
        self.parts = [
            WindowSampler(
                corpus,
                window_length,
                single,
                derive_seed(seed, "source", name),
                span=span,
                what=f"training text of source '{name}'",
            )
            for name, span in zip(names, spans, strict=True)
        ]
        self.n_windows = sum(p.n_windows for p in self.parts)
        self._bounds = share_bounds(weights)

    def before(self, block: int) -> np.ndarray:
        """Samples of each source in blocks [0, block): exact shares of block * BLOCK, never rounding drift."""
        cumulative = [block * BLOCK * b // _SCALE for b in self._bounds]
        return np.diff(np.array(cumulative, dtype=np.int64))

    def sources_of(self, samples: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(source index, that source's own sample index) of every sample index."""
        blocks, positions = np.divmod(np.asarray(samples, dtype=np.int64), BLOCK)
        source = np.empty(len(blocks), dtype=np.int64)
        own = np.empty(len(blocks), dtype=np.int64)
        for block in np.unique(blocks).tolist():
            here = blocks == block
            first = self.before(block)
            counts = self.before(block + 1) - first
            ends = np.cumsum(counts)  # the block's slots, source by source: [ends - counts, ends)
            slots = FeistelPermutation(BLOCK, derive_seed(self.seed, "mixture", block))(positions[here])
            s = np.searchsorted(ends, slots, side="right")
            source[here] = s
            own[here] = first[s] + slots - (ends[s] - counts[s])
        return source, own

    def starts_of(self, samples: np.ndarray) -> np.ndarray:
        """Corpus offsets of the windows of these sample indices."""
        source, own = self.sources_of(samples)
        out = np.empty(len(source), dtype=np.int64)
        for s, part in enumerate(self.parts):
            here = source == s
            if here.any():
                out[here] = part.starts_of(own[here])
        return out
