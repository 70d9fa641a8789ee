"""The token cache: tokenise the corpus once per (data, tokenizer) into memory-mapped files; reuse it."""

from __future__ import annotations

import hashlib
import itertools
import json
import multiprocessing as mp
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

from lmpt.config.schema import DataConfig, TokenizerConfig
from lmpt.console import console, info, is_main_process
from lmpt.data.corpus import META_NAME, TokenCorpus, token_dtype
from lmpt.data.corpus_writer import CorpusWriter
from lmpt.data.fingerprint import corpus_fingerprint
from lmpt.data.mixture import resolve_sources
from lmpt.data.readers import format_of
from lmpt.data.readers.streams import compression_of
from lmpt.data.sampler import Span
from lmpt.data.split import Items, source_items, train_only
from lmpt.data.tokenize_worker import encode_chunk, init_worker
from lmpt.tokenizer.tokenizer import Tokenizer
from lmpt.tokenizer.train import prepare_tokenizer

_CACHE_VERSION = 2  # bump when the cache layout changes so old caches are rebuilt
_CHUNK_DOCS = 256
_POOL_MIN_BYTES = 8_000_000


@dataclass(frozen=True)
class SourceSpans:
    """Where one source's tokens lie in each split of the cache, and its mixture weight."""

    name: str
    weight: float
    train: Span
    val: Span


@dataclass
class PreparedData:
    """Everything the trainer needs from the data stage."""

    tokenizer: Tokenizer
    train: TokenCorpus
    val: TokenCorpus
    reused: bool
    cache_dir: Path
    sources: list[SourceSpans]

    def source_at(self, split: str, offset: int) -> str:
        """Name of the source whose text holds token `offset` of `split` ("" when the run has one source)."""
        found = [s.name for s in self.sources if getattr(s, split)[0] <= offset < getattr(s, split)[1]]
        return found[0] if found else ""


def default_cache_root(cfg_cache_dir: str | None) -> Path:
    """data.cache_dir when set, else $LMPT_CACHE_DIR, else ~/.cache/lmpt."""
    chosen = cfg_cache_dir or os.environ.get("LMPT_CACHE_DIR") or "~/.cache/lmpt"
    return Path(chosen).expanduser()


def _chunks(items: Iterator[tuple[str, list[str]]]) -> Iterator[list[tuple[str, list[str]]]]:
    while chunk := list(itertools.islice(items, _CHUNK_DOCS)):
        yield chunk


def _pool_context() -> mp.context.BaseContext:
    # fork starts workers instantly and needs no importable __main__; spawn elsewhere
    return mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")


def _build(directory: Path, items: list[Items], tokenizer: Tokenizer, workers: int, total_bytes: int | None) -> dict:
    """Tokenise every source's documents into `directory` (train.* and val.*), source after source; return
    the counts and each source's token span in each split."""
    dtype = token_dtype(tokenizer.vocab_size)
    writers = {s: CorpusWriter(directory, s, dtype) for s in ("train", "val")}
    columns = (TextColumn("tokenising"), BarColumn(), DownloadColumn(), TransferSpeedColumn())
    live = is_main_process() and console.is_terminal  # no bar in logs and on other ranks
    progress = Progress(*columns, console=console, transient=True, disable=not live)
    init_args = (str(tokenizer.path), tokenizer.special.eos)
    spans: list[dict[str, list[int]]] = []
    pool = _pool_context().Pool(workers, init_worker, init_args) if workers > 1 else None
    if pool is None:
        init_worker(*init_args, threads=os.cpu_count() or 1)
    try:
        with progress:
            task = progress.add_task("tokenising", total=total_bytes)  # None: compressed, no known end
            for source_items in items:
                first = {split: writer.n_tokens for split, writer in writers.items()}
                chunks = _chunks(source_items())
                results = pool.imap(encode_chunk, chunks) if pool else map(encode_chunk, chunks)
                for encoded, n_chars in results:
                    for split, docs in encoded.items():
                        writers[split].add(docs)
                    progress.advance(task, n_chars)  # characters approximate bytes well enough for a bar
                spans.append({split: [first[split], writer.n_tokens] for split, writer in writers.items()})
    finally:
        if pool is not None:
            pool.terminate()
            pool.join()
        counts = {split: writer.close() for split, writer in writers.items()}
    return {"dtype": dtype.name, "eos_id": tokenizer.special.eos, "splits": counts, "sources": spans}


def _read_meta(directory: Path, tokenizer: Tokenizer | None = None) -> dict | None:
    """The cache's meta.json when the cache is complete (and, given `tokenizer`, was made with it)."""
    try:
        meta = json.loads((directory / META_NAME).read_text())
    except (OSError, ValueError):
        return None
    if tokenizer is not None and meta.get("tokenizer_fingerprint") != tokenizer.fingerprint:
        return None  # made with another tokenizer: never used, rebuilt
    return meta if meta.get("complete") else None


def prepare_corpora(
    cfg: DataConfig,
    tokenizer_cfg: TokenizerConfig,
    base_dir: Path,
    cache_root: Path,
    tokenizer: Tokenizer | None = None,
) -> PreparedData:
    """Resolve the text, train or reuse the tokenizer (training text only) unless `tokenizer` is given (a
    resumed run's own), and build or reuse the token cache of that tokenizer under `cache_root/tokens/<key>/`
    (the key holds the tokenizer's fingerprint: a cache made with another tokenizer is never used)."""
    sources = resolve_sources(cfg, base_dir)
    fingerprint = corpus_fingerprint(cfg, sources, Path(cache_root) / "fingerprints")
    items = [source_items(source, cfg.text_field, cfg.val_fraction) for source in sources]
    if tokenizer is None:
        tokenizer = prepare_tokenizer(tokenizer_cfg, train_only(items), fingerprint, cache_root)

    cache_dir = Path(cache_root) / "tokens" / cache_key(cfg, fingerprint, tokenizer)
    meta = _read_meta(cache_dir, tokenizer)
    reused = meta is not None
    if meta is None:
        paths = [p for source in sources for p in source.train_paths + source.val_paths]
        meta = _build_cache(cache_dir, items, tokenizer, cfg, paths)
    else:
        info(f"reusing token cache {cache_dir} ({meta['splits']['train']['n_tokens']:,} train tokens)")
    spans = [
        SourceSpans(source.name, source.weight, tuple(where["train"]), tuple(where["val"]))
        for source, where in zip(sources, meta["sources"], strict=True)
    ]
    return PreparedData(
        tokenizer=tokenizer,
        train=TokenCorpus.open(cache_dir, "train"),
        val=TokenCorpus.open(cache_dir, "val"),
        reused=reused,
        cache_dir=cache_dir,
        sources=spans,
    )


def cache_key(cfg: DataConfig, corpus_fingerprint: str, tokenizer: Tokenizer) -> str:
    """The token cache's directory name: the text (with how it splits) and the tokenizer's identity."""
    key_settings = [corpus_fingerprint, tokenizer.fingerprint, cfg.documents, cfg.text_field, cfg.val_fraction]
    return hashlib.sha256(json.dumps([_CACHE_VERSION, *key_settings]).encode()).hexdigest()[:32]


def _build_cache(cache_dir: Path, items: list[Items], tokenizer: Tokenizer, cfg: DataConfig, paths: list[Path]) -> dict:
    """Build into a temporary directory, write meta.json last, rename into place (a lost race is fine)."""
    total_bytes = sum(p.stat().st_size for p in paths)
    workers = max(1, cfg.tokenize_workers or os.cpu_count() or 1)
    if not cfg.tokenize_workers and total_bytes < _POOL_MIN_BYTES:
        workers = 1  # starting a pool costs more than it saves on a few MB (one process still uses all cores)
    plain = all(format_of(p) != "parquet" and not compression_of(p) for p in paths)  # file size = text size
    what = "text" if plain else "files"
    info(f"tokenising {total_bytes / 1e6:.1f} MB of {what} with {workers} process(es) into {cache_dir}")
    cache_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp_dir = Path(tempfile.mkdtemp(prefix=f".tmp-{cache_dir.name}-", dir=cache_dir.parent))
    started = time.perf_counter()
    try:
        meta = _build(tmp_dir, items, tokenizer, workers, total_bytes if plain else None)
    except BaseException:
        shutil.rmtree(tmp_dir, ignore_errors=True)
        raise
    seconds = time.perf_counter() - started
    meta.update(
        complete=True,
        version=_CACHE_VERSION,
        vocab_size=tokenizer.vocab_size,
        tokenizer_fingerprint=tokenizer.fingerprint,
        text_bytes=total_bytes,
        build_seconds=round(seconds, 3),
    )
    (tmp_dir / META_NAME).write_text(json.dumps(meta, indent=2) + "\n")
    if cache_dir.exists() and _read_meta(cache_dir, tokenizer) is None:
        shutil.rmtree(cache_dir, ignore_errors=True)  # damaged (no complete meta.json) or another tokenizer's
    try:
        os.rename(tmp_dir, cache_dir)
    except OSError:
        if _read_meta(cache_dir, tokenizer) is None:
            raise
        shutil.rmtree(tmp_dir, ignore_errors=True)  # another process committed the same cache first
    counts = meta["splits"]
    info(
        f"token cache {cache_dir}: {counts['train']['n_tokens']:,} train / {counts['val']['n_tokens']:,} val "
        f"tokens ({total_bytes / 1e6 / max(seconds, 1e-9):.1f} MB/s of {what})"
    )
    return meta
