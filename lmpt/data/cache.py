"""The token cache: tokenise the corpus once per (data, tokenizer) into memory-mapped files; reuse it."""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import multiprocessing as mp
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

from lmpt.config.schema import DataConfig, TokenizerConfig
from lmpt.console import console, info, is_main_process
from lmpt.data.corpus import META_NAME, TokenCorpus, token_dtype
from lmpt.data.corpus_writer import CorpusWriter
from lmpt.data.fingerprint import corpus_fingerprint
from lmpt.data.sources import iter_documents, resolve_paths
from lmpt.data.split import choose_unit, split_stream, train_only
from lmpt.data.tokenize_worker import encode_chunk, init_worker
from lmpt.errors import LmptError
from lmpt.tokenizer.tokenizer import Tokenizer
from lmpt.tokenizer.train import prepare_tokenizer

_CACHE_VERSION = 1  # bump when the cache layout changes so old caches are rebuilt
_CHUNK_DOCS = 256
_POOL_MIN_BYTES = 8_000_000

Items = Callable[[], Iterator[tuple[str, list[str]]]]


@dataclass
class PreparedData:
    """Everything the trainer needs from the data stage."""

    tokenizer: Tokenizer
    train: TokenCorpus
    val: TokenCorpus
    reused: bool
    cache_dir: Path


def default_cache_root(cfg_cache_dir: str | None) -> Path:
    """data.cache_dir when set, else $LMPT_CACHE_DIR, else ~/.cache/lmpt."""
    chosen = cfg_cache_dir or os.environ.get("LMPT_CACHE_DIR") or "~/.cache/lmpt"
    return Path(chosen).expanduser()


def _split_items(cfg: DataConfig, train_paths: list[Path], val_paths: list[Path]) -> Items:
    """A re-iterable stream of ("train" | "val", document) in a fixed order. The checks that read text run
    on the first call only: a launch that finds its tokenizer and cache never makes one."""
    return _first_use(lambda: _split_plan(cfg, train_paths, val_paths))


def _first_use(make: Callable[[], Items]) -> Items:
    plan = functools.cache(make)
    return lambda: plan()()


def _split_plan(cfg: DataConfig, train_paths: list[Path], val_paths: list[Path]) -> Items:
    train_docs = lambda: iter_documents(train_paths, cfg.documents, cfg.text_field)
    if val_paths:
        val_docs = lambda: iter_documents(val_paths, cfg.documents, cfg.text_field)
        if next(train_docs(), None) is None:
            raise LmptError("the training text is empty (no non-blank line in data.paths): add text")
        if next(val_docs(), None) is None:
            raise LmptError("the validation text is empty (no non-blank line in data.val_paths): add text")
        return lambda: itertools.chain((("train", d) for d in train_docs()), (("val", d) for d in val_docs()))
    unit = choose_unit(train_docs, cfg.val_fraction)
    return lambda: split_stream(train_docs, cfg.val_fraction, unit)


def _chunks(items: Iterator[tuple[str, list[str]]]) -> Iterator[list[tuple[str, list[str]]]]:
    while chunk := list(itertools.islice(items, _CHUNK_DOCS)):
        yield chunk


def _pool_context() -> mp.context.BaseContext:
    # fork starts workers instantly and needs no importable __main__; spawn elsewhere
    return mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")


def _build(directory: Path, items: Items, tokenizer: Tokenizer, workers: int, total_bytes: int) -> dict:
    """Tokenise every document into `directory` (train.* and val.*); return the counts."""
    dtype = token_dtype(tokenizer.vocab_size)
    writers = {s: CorpusWriter(directory, s, dtype) for s in ("train", "val")}
    columns = (TextColumn("tokenising"), BarColumn(), DownloadColumn(), TransferSpeedColumn())
    live = is_main_process() and console.is_terminal  # no bar in logs and on other ranks
    progress = Progress(*columns, console=console, transient=True, disable=not live)
    init_args = (str(tokenizer.path), tokenizer.special.eos)
    pool = _pool_context().Pool(workers, init_worker, init_args) if workers > 1 else None
    if pool is None:
        init_worker(*init_args, threads=os.cpu_count() or 1)
    try:
        with progress:
            task = progress.add_task("tokenising", total=total_bytes)
            chunks = _chunks(items())
            results = pool.imap(encode_chunk, chunks) if pool else map(encode_chunk, chunks)
            for encoded, n_chars in results:
                for split, docs in encoded.items():
                    writers[split].add(docs)
                progress.advance(task, n_chars)  # characters approximate bytes well enough for a bar
    finally:
        if pool is not None:
            pool.terminate()
            pool.join()
        counts = {split: writer.close() for split, writer in writers.items()}
    return {"dtype": dtype.name, "eos_id": tokenizer.special.eos, "splits": counts}


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
    train_paths = resolve_paths(list(cfg.paths), base_dir)
    val_paths = resolve_paths(list(cfg.val_paths), base_dir) if cfg.val_paths else []
    overlap = set(train_paths) & set(val_paths)
    if overlap:
        raise LmptError(f"{sorted(overlap)[0]} is in both data.paths and data.val_paths: list it in one only")
    fingerprint = corpus_fingerprint(cfg, train_paths, val_paths, Path(cache_root) / "fingerprints")
    items = _split_items(cfg, train_paths, val_paths)
    if tokenizer is None:
        tokenizer = prepare_tokenizer(tokenizer_cfg, train_only(items), fingerprint, cache_root)

    key_settings = [fingerprint, tokenizer.fingerprint, cfg.documents, cfg.text_field, cfg.val_fraction]
    key = hashlib.sha256(json.dumps([_CACHE_VERSION, *key_settings]).encode()).hexdigest()[:32]
    cache_dir = Path(cache_root) / "tokens" / key
    meta = _read_meta(cache_dir, tokenizer)
    reused = meta is not None
    if meta is None:
        meta = _build_cache(cache_dir, items, tokenizer, cfg, train_paths + val_paths)
    else:
        info(f"reusing token cache {cache_dir} ({meta['splits']['train']['n_tokens']:,} train tokens)")
    return PreparedData(
        tokenizer=tokenizer,
        train=TokenCorpus.open(cache_dir, "train"),
        val=TokenCorpus.open(cache_dir, "val"),
        reused=reused,
        cache_dir=cache_dir,
    )


def _build_cache(cache_dir: Path, items: Items, tokenizer: Tokenizer, cfg: DataConfig, paths: list[Path]) -> dict:
    """Build into a temporary directory, write meta.json last, rename into place (a lost race is fine)."""
    total_bytes = sum(p.stat().st_size for p in paths)
    workers = max(1, cfg.tokenize_workers or os.cpu_count() or 1)
    if not cfg.tokenize_workers and total_bytes < _POOL_MIN_BYTES:
        workers = 1  # starting a pool costs more than it saves on a few MB (one process still uses all cores)
    info(f"tokenising {total_bytes / 1e6:.1f} MB of text with {workers} process(es) into {cache_dir}")
    cache_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp_dir = Path(tempfile.mkdtemp(prefix=f".tmp-{cache_dir.name}-", dir=cache_dir.parent))
    started = time.perf_counter()
    try:
        meta = _build(tmp_dir, items, tokenizer, workers, total_bytes)
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
        f"tokens ({total_bytes / 1e6 / max(seconds, 1e-9):.1f} MB/s)"
    )
    return meta
