"""The token cache: tokenise the corpus once per (data, tokenizer) into memory-mapped files; reuse it."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lmpt.config.schema import DataConfig, TokenizerConfig
from lmpt.config.validate import parse_max_tokens
from lmpt.console import info
from lmpt.data.corpus import META_NAME, TokenCorpus, token_dtype
from lmpt.data.fingerprint import corpus_fingerprint, memo_dir
from lmpt.data.mixture import resolve_sources
from lmpt.data.readers import format_of
from lmpt.data.readers.hf import StreamInterrupted
from lmpt.data.readers.streams import compression_of
from lmpt.data.sampler import Span
from lmpt.data.shard_build import build_shards
from lmpt.data.shards import assemble, read_manifest, shard_path, shards_dir
from lmpt.data.split import Items, source_items, train_only
from lmpt.data.streamed import streamed_inputs
from lmpt.errors import LmptError
from lmpt.tokenizer.base import Tokenizer
from lmpt.tokenizer.train import known_tokenizer, prepare_tokenizer

if TYPE_CHECKING:
    from lmpt.quality.stage import QualityStage

_CACHE_VERSION = 2  # bump when the cache layout changes so old caches are rebuilt
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

    def source_tokens(self) -> list[tuple[str, float, int]]:
        """(name, weight, training tokens) of each source of the text."""
        return [(s.name, s.weight, s.train[1] - s.train[0]) for s in self.sources]

    def source_at(self, split: str, offset: int) -> str:
        """Name of the source whose text holds token `offset` of `split` ("" when the run has one source)."""
        found = [s.name for s in self.sources if getattr(s, split)[0] <= offset < getattr(s, split)[1]]
        return found[0] if found else ""


def default_cache_root(cfg_cache_dir: str | None) -> Path:
    """data.cache_dir when set, else $LMPT_CACHE_DIR, else ~/.cache/lmpt; a path that is (or lies under) a
    file is refused naming the setting it came from."""
    setting = "data.cache_dir" if cfg_cache_dir else "$LMPT_CACHE_DIR" if os.environ.get("LMPT_CACHE_DIR") else None
    chosen = cfg_cache_dir or os.environ.get("LMPT_CACHE_DIR") or "~/.cache/lmpt"
    root = Path(chosen).expanduser()
    blocking = next((p for p in (root, *root.parents) if p.exists()), None)
    if blocking is not None and not blocking.is_dir():
        named = f"{setting}={chosen}" if setting else f"the cache directory {chosen}"
        raise LmptError(
            f"{named}: {blocking} is a file, not a directory: point {setting or 'data.cache_dir'} at a directory "
            "(lmpt creates it if missing)"
        )
    return root


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
    quality: QualityStage | None = None,
) -> PreparedData:
    """Resolve the text, train or reuse the tokenizer (training text only) unless `tokenizer` is given (a
    resumed run's own), and build or reuse the token cache of that tokenizer under `cache_root/tokens/<key>/`
    (the key holds the tokenizer's fingerprint: a cache made with another tokenizer is never used). `quality`:
    the documents pass lmpt.quality's dedup and filters first (their settings are part of the fingerprint)."""
    prepared = prepare_part(cfg, tokenizer_cfg, base_dir, cache_root, (0, 1), tokenizer, quality)
    assert prepared is not None, "a build of every shard completes the cache"
    return prepared


def prepare_part(
    cfg: DataConfig,
    tokenizer_cfg: TokenizerConfig,
    base_dir: Path,
    cache_root: Path,
    part: tuple[int, int],
    tokenizer: Tokenizer | None = None,
    quality: QualityStage | None = None,
) -> PreparedData | None:
    """prepare_corpora for part `part` = (i, N) of the cache's shards (lmpt-prepare prepare.shard=i/N): build
    the unsealed shards j with j % N == i; None while other parts' shards are still missing (the part that
    seals the last shard completes the cache)."""
    sources = resolve_sources(cfg, base_dir)
    fingerprint = corpus_fingerprint(cfg, sources, memo_dir(cache_root))
    items = [source_items(source, cfg.text_field, cfg.val_fraction) for source in sources]
    streamed = any(source.dataset is not None for source in sources)
    if streamed:  # data=hf: the tokenizer first, from the stream's head, so data.max_tokens can count its tokens
        tokenizer, items = streamed_inputs(
            items, tokenizer_cfg, tokenizer, parse_max_tokens(cfg.max_tokens), fingerprint, cache_root
        )
    if quality is not None:
        fingerprint, items = quality.apply(fingerprint, items, Path(cache_root))
    if tokenizer is None:
        tokenizer = prepare_tokenizer(tokenizer_cfg, train_only(items), fingerprint, cache_root)

    cache_dir = Path(cache_root) / "tokens" / cache_key(cfg, fingerprint, tokenizer)
    meta = _read_meta(cache_dir, tokenizer)
    reused = meta is not None
    if meta is None:
        paths = [p for s in sources for p in s.train_paths + s.val_paths + (s.dataset.files if s.dataset else [])]
        sized = not streamed or (bool(paths) and cfg.max_tokens is None)  # a Hub stream or a capped one: no known end
        meta = _build_cache(cache_dir, items, tokenizer, cfg, paths if sized else None, part)
        if meta is None:
            return None
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


def cached_train_tokens(
    cfg: DataConfig, tokenizer_cfg: TokenizerConfig, base_dir: Path, cache_root: Path
) -> list[tuple[str, float, int]] | None:
    """(name, weight, training tokens) of each source from the token cache this data and tokenizer would use, for a
    dry run's plan: nothing is tokenised or trained, and a cache (or tokenizer) not built yet answers None."""
    sources = resolve_sources(cfg, base_dir)
    fingerprint = corpus_fingerprint(cfg, sources, memo_dir(cache_root))
    tokenizer = known_tokenizer(tokenizer_cfg, fingerprint, cache_root, quiet=True)
    if tokenizer is None:
        return None
    meta = _read_meta(Path(cache_root) / "tokens" / cache_key(cfg, fingerprint, tokenizer), tokenizer)
    if meta is None:
        return None
    spans = [where["train"] for where in meta["sources"]]
    return [(s.name, s.weight, end - start) for s, (start, end) in zip(sources, spans, strict=True)]


def cache_key(cfg: DataConfig, corpus_fingerprint: str, tokenizer: Tokenizer) -> str:
    """The token cache's directory name: the text (with how it splits) and the tokenizer's identity."""
    key_settings = [corpus_fingerprint, tokenizer.fingerprint, cfg.documents, cfg.text_field, cfg.val_fraction]
    return hashlib.sha256(json.dumps([_CACHE_VERSION, *key_settings]).encode()).hexdigest()[:32]


def _build_cache(
    cache_dir: Path,
    items: list[Items],
    tokenizer: Tokenizer,
    cfg: DataConfig,
    paths: list[Path] | None,
    part: tuple[int, int] = (0, 1),
) -> dict | None:
    """Tokenise the shards of part `part` = (i, N) (all of them when N is 1) that are not sealed yet (see
    shards.py); once every shard is sealed, assemble them into a temporary directory, write meta.json last and
    rename it into place (a lost race is fine). None when other parts' shards are still missing. `paths`: the
    files read (their size sizes the work), None for a stream of unknown length."""
    total_bytes = sum(p.stat().st_size for p in paths or [])
    workers = max(1, cfg.tokenize_workers or os.cpu_count() or 1)
    if not cfg.tokenize_workers and paths is not None and total_bytes < _POOL_MIN_BYTES:
        workers = 1  # starting a pool costs more than it saves on a few MB (one process still uses all cores)
    plain = paths is not None and all(format_of(p) != "parquet" and not compression_of(p) for p in paths)
    what = "text" if plain else "files"  # plain: file size = text size
    index, count = part
    which = f" (part {index}/{count}: shards j with j % {count} == {index})" if count > 1 else ""
    size = f"{total_bytes / 1e6:.1f} MB of {what}" if paths is not None else "a streamed dataset"
    info(f"tokenising {size}{which} with {workers} process(es) into {cache_dir}")
    shards = shards_dir(cache_dir, cfg.shard_docs)
    started = time.perf_counter()
    try:
        plan = build_shards(
            shards,
            items,
            tokenizer,
            workers,
            cfg.shard_docs,
            lambda j: j % count == index,
            total_bytes if plain else None,
        )
        manifests = [read_manifest(shard_path(shards, j)) for j in range(plan.n_shards)]
        missing = sum(m is None for m in manifests)
        if missing:
            meta = _read_meta(cache_dir, tokenizer)
            if meta is not None:
                return meta  # a racing launch sealed the rest, completed the cache and removed the shards
            info(
                f"{plan.n_shards - missing} of {plan.n_shards} shards sealed: "
                "the cache is complete once the other parts finish"
            )
            return None
        extra = {
            "text_bytes": total_bytes,
            "shards": plan.n_shards,
            "shard_docs": cfg.shard_docs,
            "build_seconds": round(time.perf_counter() - started, 3),
        }
        sealed = [m for m in manifests if m is not None]  # all of them: none is missing
        meta = _assemble(cache_dir, shards, sealed, tokenizer, len(items), extra)
    except StreamInterrupted:
        raise  # a dropped connection: the sealed shards are what the next launch resumes from
    except LmptError:
        shutil.rmtree(shards, ignore_errors=True)  # bad text: fixing it changes the key, so no shard is of use
        raise
    except OSError:
        meta = _read_meta(cache_dir, tokenizer)
        if meta is None:
            raise
        return meta  # another process completed the cache (and removed the shards) meanwhile
    seconds = time.perf_counter() - started
    counts = meta["splits"]
    rate = f" ({total_bytes / 1e6 / max(seconds, 1e-9):.1f} MB/s of {what})" if paths is not None else ""
    train, val = counts["train"]["n_tokens"], counts["val"]["n_tokens"]
    info(f"token cache {cache_dir}: {train:,} train / {val:,} val tokens{rate}")
    return meta


def _assemble(
    cache_dir: Path, shards: Path, manifests: list[dict], tokenizer: Tokenizer, n_sources: int, extra: dict
) -> dict:
    """Concatenate the sealed shards into the cache, meta.json last; rename into place; remove the shards."""
    tmp_dir = Path(tempfile.mkdtemp(prefix=f".tmp-{cache_dir.name}-", dir=cache_dir.parent))
    try:
        meta = assemble(shards, manifests, tmp_dir, n_sources)
    except BaseException:
        shutil.rmtree(tmp_dir, ignore_errors=True)
        raise
    meta.update(
        complete=True,
        version=_CACHE_VERSION,
        dtype=token_dtype(tokenizer.vocab_size).name,
        eos_id=tokenizer.special.eos,
        vocab_size=tokenizer.vocab_size,
        tokenizer_fingerprint=tokenizer.fingerprint,
        **extra,
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
        committed = _read_meta(cache_dir, tokenizer)
        assert committed is not None  # read just above
        meta = committed
    shutil.rmtree(shards, ignore_errors=True)  # the cache holds every token now
    return meta
