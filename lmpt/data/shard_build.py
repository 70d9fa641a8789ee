"""Tokenise the corpus into sealed shards (see shards.py) on every core: the shards a build may write (all of
them, or those of one `prepare.shard=i/N` part) that are not sealed yet, chunk by chunk through a process pool."""

from __future__ import annotations

import itertools
import multiprocessing as mp
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

from lmpt.console import console, info, is_main_process
from lmpt.data.corpus import token_dtype
from lmpt.data.shards import ShardWriter, read_manifest, shard_path
from lmpt.data.split import Items
from lmpt.data.tokenize_worker import encode_shard_chunk, init_worker
from lmpt.tokenizer.base import Tokenizer

_CHUNK_DOCS = 256  # documents per task handed to a tokenising process

Task = tuple[int, int, list[tuple[str, list[str]]]]


class ShardPlan:
    """Walks the documents of every source, numbering shards; yields the chunks of the shards to tokenise and
    counts every shard (known once the walk ends) and those found sealed."""

    def __init__(self, shards: Path, items: list[Items], shard_docs: int, mine: Callable[[int], bool]) -> None:
        self.shards, self.items, self.shard_docs, self.mine = shards, items, shard_docs, mine
        self.n_shards = 0
        self.kept: list[int] = []
        self.todo: list[int] = []

    def _wanted(self, ordinal: int) -> bool:
        if not self.mine(ordinal):
            return False
        if read_manifest(shard_path(self.shards, ordinal)) is not None:
            self.kept.append(ordinal)
            return False
        self.todo.append(ordinal)
        return True

    def tasks(self) -> Iterator[Task]:
        """(shard ordinal, source index, chunk of documents) of every shard this build writes, in order."""
        for source, source_items in enumerate(self.items):
            documents = source_items()
            while shard := list(itertools.islice(documents, self.shard_docs)):  # parsed even when skipped
                ordinal, self.n_shards = self.n_shards, self.n_shards + 1
                if self._wanted(ordinal):
                    for start in range(0, len(shard), _CHUNK_DOCS):
                        yield ordinal, source, shard[start : start + _CHUNK_DOCS]


def _pool_context() -> mp.context.BaseContext:
    # fork starts workers instantly and needs no importable __main__; spawn elsewhere
    return mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")


def build_shards(
    shards: Path,
    items: list[Items],
    tokenizer: Tokenizer,
    workers: int,
    shard_docs: int,
    mine: Callable[[int], bool],
    total_bytes: int | None,
) -> ShardPlan:
    """Tokenise and seal every shard `mine` selects that is not sealed yet, in order; return the plan (how many
    shards the corpus has, which were kept, which were written)."""
    shards.mkdir(parents=True, exist_ok=True)
    dtype = token_dtype(tokenizer.vocab_size)
    plan = ShardPlan(shards, items, shard_docs, mine)
    columns = (TextColumn("tokenising"), BarColumn(), DownloadColumn(), TransferSpeedColumn())
    live = is_main_process() and console.is_terminal  # no bar in logs and on other ranks
    progress = Progress(*columns, console=console, transient=True, disable=not live)
    init_args = (tokenizer, tokenizer.special.eos)
    pool = _pool_context().Pool(workers, init_worker, init_args) if workers > 1 else None
    if pool is None:
        init_worker(*init_args, threads=os.cpu_count() or 1)
    current: ShardWriter | None = None
    try:
        with progress:
            task = progress.add_task("tokenising", total=total_bytes)  # None: compressed, no known end
            results = pool.imap(encode_shard_chunk, plan.tasks()) if pool else map(encode_shard_chunk, plan.tasks())
            for ordinal, source, encoded, n_chars in results:
                if current is not None and current.ordinal != ordinal:
                    sealing, current = current, None
                    sealing.seal()
                if current is None:
                    current = ShardWriter(shards, ordinal, source, dtype)
                current.add(encoded)
                progress.advance(task, n_chars)  # characters approximate bytes well enough for a bar
            if current is not None:
                sealing, current = current, None
                sealing.seal()
    finally:
        if current is not None:
            current.abandon()
        if pool is not None:
            pool.terminate()
            pool.join()
    if plan.kept:
        info(f"kept {len(plan.kept)} sealed shard(s) of an earlier build; tokenised {len(plan.todo)}")
    return plan
