"""The corpus fingerprint without reading the corpus: each file's content hash is computed once (when its
cache is first built) and remembered under its (path, size, modification time); a later launch finds it from
a stat call. `data.verify=full` hashes every byte again, and a changed file then gets a new cache."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from lmpt.config.schema import DataConfig
from lmpt.config.validate import parse_max_tokens
from lmpt.console import info
from lmpt.data.mixture import Source
from lmpt.data.readers import format_of

VERIFY_MODES = ("stat", "full")
FINGERPRINT_VERSION = 2  # bump when the fingerprint changes so old caches are not reused
_HASH_BLOCK = 1 << 20


def memo_dir(cache_root: Path) -> Path:
    """Where the file hashes a fingerprint remembers live under the cache root `cache_root`."""
    return Path(cache_root) / "fingerprints"


def _content_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(_HASH_BLOCK):
            h.update(block)
    return h.hexdigest()


def _remember(memo: Path, record: dict) -> None:
    """Write `record` to `memo` atomically (a concurrent reader sees the old file or the new one)."""
    memo.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=memo.parent)
    with os.fdopen(fd, "w") as f:
        json.dump(record, f)
    os.replace(tmp, memo)


def file_sha256(path: Path, memo_dir: Path, verify: str) -> tuple[str, bool]:
    """(sha256 of the bytes of `path`, whether they were read now). Unless `verify` is "full", a hash
    remembered for the same path, size and modification time is returned without opening the file."""
    st = path.stat()
    stamp = {"path": str(path), "size": st.st_size, "mtime_ns": st.st_mtime_ns}
    memo = memo_dir / (hashlib.sha256(json.dumps(stamp, sort_keys=True).encode()).hexdigest()[:32] + ".json")
    if verify != "full":
        try:
            record = json.loads(memo.read_text())
            if {k: record.get(k) for k in stamp} == stamp and isinstance(record.get("sha256"), str):
                return record["sha256"], False
        except (OSError, ValueError):
            pass  # not hashed yet (or a damaged record): hash now
    digest = _content_sha256(path)
    _remember(memo, {**stamp, "sha256": digest})
    return digest, True


def _hash_files(h: Any, paths: list[Path], memo_dir: Path, verify: str) -> int:
    """Feed each file's format, size and content hash to `h`; return the bytes read to hash them now."""
    read = 0
    for path in paths:
        digest, was_read = file_sha256(path, memo_dir, verify)
        read += path.stat().st_size if was_read else 0
        h.update(f"{format_of(path)}:{path.stat().st_size}:{digest}\n".encode())  # the format decides parsing
    return read


def corpus_fingerprint(cfg: DataConfig, sources: list[Source], memo_dir: Path) -> str:
    """sha256 over every source's files (format, size, content hash) and every setting that changes how
    the text splits into documents; reads text only for files never hashed before (all: data.verify=full).
    Weights are not in it: they change which windows are drawn, not the tokens."""
    settings = {"v": FINGERPRINT_VERSION, "text_field": cfg.text_field, "val_fraction": cfg.val_fraction}
    h = hashlib.sha256(json.dumps(settings, sort_keys=True).encode())
    read = 0
    for source in sources:
        h.update(json.dumps({"source": source.name, "documents": source.documents}).encode())
        if source.dataset is not None:  # data=hf: the dataset's identity and the cap; a local one's files below
            identity = {**source.dataset.identity(), "max_tokens": parse_max_tokens(cfg.max_tokens)}
            h.update(json.dumps(identity, sort_keys=True).encode())
            read += _hash_files(h, source.dataset.files, memo_dir, cfg.verify)
        for label, paths in (("train", source.train_paths), ("val", source.val_paths)):
            h.update(f"{label}:{len(paths)}\n".encode())
            read += _hash_files(h, paths, memo_dir, cfg.verify)
    if read:
        info(f"hashed {read / 1e6:.1f} MB of data files (remembered: the next launch reads none of them)")
    return h.hexdigest()
