"""Token-cache shards: the unit a cache is built in, that a killed build resumes from and that
`lmpt-prepare prepare.shard=i/N` divides between processes.

A build of the cache `tokens/<key>/` writes its shards to `tokens/<key>.shards-<shard_docs>/`. Shard j holds
the tokens of `data.shard_docs` consecutive documents of one source (the last shard of a source may hold fewer;
shards never cross sources and are numbered through the sources in order). Each shard is a directory
`shard-<j:06d>/` holding the split files of corpus.py (train.* and val.*) and `manifest.json` (its source, each
split's counts and each file's size). It is written as a checkpoint is: into a temporary directory, files
fsync'd, the manifest last, then renamed into place; a shard directory whose manifest is present and whose file
sizes match it is sealed and never written again. Once every shard is sealed, they are concatenated (offsets
rebased) into the cache's usual single files, meta.json is written last, the cache directory is renamed into
place and the shards directory is removed: the reader (corpus.py) sees the same format however it was built.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from lmpt.data.corpus import split_files
from lmpt.data.corpus_writer import CorpusWriter
from lmpt.data.tokenize_worker import EncodedDocs
from lmpt.safe_files import fsync_dir

MANIFEST_NAME = "manifest.json"
SPLITS = ("train", "val")


def shards_dir(cache_dir: Path, shard_docs: int) -> Path:
    """Where the shards of `cache_dir` are built (the shard size is in the name: another size, other shards)."""
    return cache_dir.parent / f"{cache_dir.name}.shards-{shard_docs}"


def shard_path(shards: Path, ordinal: int) -> Path:
    """The directory of sealed shard `ordinal`."""
    return shards / f"shard-{ordinal:06d}"


def _discard(shard: Path) -> None:
    """Move an untrusted shard directory aside (atomically: a racing process may be sealing it) and delete it."""
    aside = shard.parent / f".tmp-discard-{shard.name}-{os.getpid()}"
    try:
        os.rename(shard, aside)
    except OSError:
        return  # another process moved it first
    shutil.rmtree(aside, ignore_errors=True)


def read_manifest(shard: Path) -> dict | None:
    """The manifest of a sealed shard; None when the shard is absent or its files do not match it."""
    try:
        manifest = json.loads((shard / MANIFEST_NAME).read_text())
        sizes = manifest["sizes"]
        if all((shard / name).stat().st_size == size for name, size in sizes.items()):
            return manifest
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    return None


class ShardWriter:
    """Writes one shard into a temporary directory beside the sealed ones; `seal` renames it into place."""

    def __init__(self, shards: Path, ordinal: int, source: int, dtype: np.dtype) -> None:
        self.ordinal = ordinal
        self.source = source
        self._final = shard_path(shards, ordinal)
        self._tmp = Path(tempfile.mkdtemp(prefix=f".tmp-shard-{ordinal:06d}-", dir=shards))
        self._writers = {split: CorpusWriter(self._tmp, split, dtype) for split in SPLITS}

    def add(self, encoded: dict[str, EncodedDocs]) -> None:
        """Append a chunk's encoded documents to their splits."""
        for split, docs in encoded.items():
            self._writers[split].add(docs)

    def seal(self) -> None:
        """Flush and fsync the files, write the manifest last, rename into place (when another process sealed
        the same shard first, keep its one: both hold the same tokens)."""
        counts = {split: writer.close() for split, writer in self._writers.items()}
        sizes = {f.name: f.stat().st_size for f in sorted(self._tmp.glob("*.bin"))}
        manifest = {"ordinal": self.ordinal, "source": self.source, "splits": counts, "sizes": sizes}
        with open(self._tmp / MANIFEST_NAME, "w") as f:
            f.write(json.dumps(manifest, indent=2) + "\n")
            f.flush()
            os.fsync(f.fileno())
        fsync_dir(self._tmp)
        if self._final.exists() and read_manifest(self._final) is None:
            _discard(self._final)  # unfinished or damaged: never trusted, replaced by this one
        try:
            os.rename(self._tmp, self._final)
        except OSError:
            if read_manifest(self._final) is None:
                raise
            shutil.rmtree(self._tmp, ignore_errors=True)
        fsync_dir(self._final.parent)

    def abandon(self) -> None:
        """Drop the unfinished shard (an exception stopped the build)."""
        for writer in self._writers.values():
            writer.close()
        shutil.rmtree(self._tmp, ignore_errors=True)


def _append(out: dict, shard: Path, split: str, counts: dict[str, int], totals: dict[str, int]) -> None:
    """Append one shard's split to the open output files, rebasing its offsets."""
    files = split_files(shard, split)
    with open(files["tokens"], "rb") as f:
        shutil.copyfileobj(f, out["tokens"], 1 << 24)
    rebase = {"doc_offsets": totals["n_tokens"], "sent_offsets": totals["n_tokens"]}
    rebase["doc_sent_offsets"] = totals["n_sentences"]
    for name, base in rebase.items():
        offsets = np.fromfile(files[name], dtype=np.int64)[:-1]  # the end entry is written once, at the end
        out[name].write((offsets + base).tobytes())
    for key in totals:
        totals[key] += counts[key]


def assemble(shards: Path, manifests: list[dict], directory: Path, n_sources: int) -> dict:
    """Concatenate the sealed shards, in order, into the split files of `directory`; return each split's
    counts and each source's token span [start, end) in each split."""
    splits: dict[str, dict[str, int]] = {}
    spans: list[dict[str, list[int]]] = [{} for _ in range(n_sources)]
    for split in SPLITS:
        totals = {"n_tokens": 0, "n_docs": 0, "n_sentences": 0}
        out = {name: open(path, "wb") for name, path in split_files(directory, split).items()}
        try:
            for source in range(n_sources):
                start = totals["n_tokens"]
                for manifest in manifests:
                    if manifest["source"] == source:
                        shard = shard_path(shards, manifest["ordinal"])
                        _append(out, shard, split, manifest["splits"][split], totals)
                spans[source][split] = [start, totals["n_tokens"]]
            out["doc_offsets"].write(np.int64(totals["n_tokens"]).tobytes())
            out["sent_offsets"].write(np.int64(totals["n_tokens"]).tobytes())
            out["doc_sent_offsets"].write(np.int64(totals["n_sentences"]).tobytes())
        finally:
            for f in out.values():
                f.flush()
                os.fsync(f.fileno())  # durable before meta.json declares the cache complete
                f.close()
        splits[split] = totals
    return {"splits": splits, "sources": spans}
