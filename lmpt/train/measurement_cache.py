"""What lmpt measures about a machine and keeps between runs (a matmul peak, a model's training rate): a JSON file in
the cache directory ($LMPT_CACHE_DIR or ~/.cache/lmpt), {SECTION: {key: entry}}, holding the best entry seen under
each key, so that a measurement taken on a loaded machine never replaces the machine's unloaded one.

The file is best effort: a missing, unreadable or malformed one (or a malformed entry) is no cache and is rewritten;
a blocked, full or read-only cache directory costs only the cache, never the run."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lmpt.errors import LmptError


@dataclass(frozen=True)
class MeasurementCache:
    name: str
    """The file's name in the cache directory."""
    section: str
    """The file's one top-level key, over the entries."""
    valid: Callable[[Any], bool]
    """Whether an entry read back is one this cache wrote (others are dropped)."""
    score: Callable[[Any], float]
    """An entry's worth: the higher one is kept."""

    def path(self) -> Path | None:
        """The file in lmpt's cache directory; None where that directory is blocked by a file (the data stage says
        so)."""
        from lmpt.data.cache import default_cache_root

        try:
            return default_cache_root(None) / self.name
        except LmptError:
            return None

    def read(self, path: Path | None) -> dict[str, Any]:
        """The valid entries in `path` (None: no cache)."""
        try:
            entries = json.loads(path.read_text())[self.section] if path is not None else {}
        except (OSError, ValueError, KeyError, TypeError):
            return {}
        if not isinstance(entries, dict):
            return {}
        return {key: entry for key, entry in entries.items() if self.valid(entry)}

    def keep(self, path: Path | None, key: str, entry: Any) -> None:
        """Record `entry` under `key` unless one scoring at least as high is there by now (processes measuring side
        by side may race); best effort."""
        from lmpt.safe_files import write_atomically

        if path is None:
            return
        entries = self.read(path)
        if key in entries and self.score(entries[key]) >= self.score(entry):
            return
        entries[key] = entry
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(path, lambda tmp: tmp.write_text(json.dumps({self.section: entries}, indent=1) + "\n"))
        except (OSError, LmptError):
            pass
