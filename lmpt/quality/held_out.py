"""The held-out text of a deduplicated corpus. The split into training and held-out documents is taken from the raw
stream, before the quality stage, so that runs with and without the stage hold out the same documents. In a corpus
of many copies, the held-out documents are then copies of documents the stage keeps for training, and validation
would measure recall of the training text. When the stage deduplicates, held-out documents that are exact copies of
a kept training document are left out of validation, said in one line; a held-out text with nothing else left is
refused."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lmpt.console import console
from lmpt.data.split import Items
from lmpt.errors import LmptError

COPIES_NAME = "held_out_copies.json"


def text_digest(text: str) -> str:
    """What makes two documents copies: their whole text (lines joined by newlines, as the stage's input holds it)."""
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


@dataclass(frozen=True)
class HeldOutCopies:
    """Which held-out documents copy a kept training document, and how many each source holds out and loses."""

    digests: frozenset[str]
    held_out: tuple[int, ...]
    """Held-out documents of each source."""
    copies: tuple[int, ...]
    """Of them, the exact copies of a kept training document (left out of validation)."""

    def keeps(self, lines: list[str]) -> bool:
        """Whether a held-out document stays in validation."""
        return text_digest("\n".join(lines)) not in self.digests

    def to_json(self) -> dict[str, Any]:
        return {"digests": sorted(self.digests), "held_out": list(self.held_out), "copies": list(self.copies)}


def find_copies(kept_texts: Iterable[str], sources: list[Items]) -> HeldOutCopies:
    """The held-out documents of `sources` whose text equals one of `kept_texts` (the stage's kept training
    documents), in one pass over the kept text; only the held-out digests are held in memory."""
    held = [[text_digest("\n".join(doc)) for split, doc in source() if split == "val"] for source in sources]
    wanted = {digest for digests in held for digest in digests}
    found = {digest for text in kept_texts if (digest := text_digest(text)) in wanted}
    copies = tuple(sum(digest in found for digest in digests) for digests in held)
    return HeldOutCopies(frozenset(found), tuple(len(d) for d in held), copies)


def write_copies(work: Path, copies: HeldOutCopies) -> None:
    tmp = work / f".{COPIES_NAME}.tmp"
    tmp.write_text(json.dumps(copies.to_json()) + "\n")
    os.replace(tmp, work / COPIES_NAME)


def read_copies(work: Path) -> HeldOutCopies | None:
    """What `write_copies` wrote in `work`, or None (not found yet, or the stage does not deduplicate)."""
    try:
        data = json.loads((work / COPIES_NAME).read_text())
        return HeldOutCopies(frozenset(data["digests"]), tuple(data["held_out"]), tuple(data["copies"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def report_copies(copies: HeldOutCopies) -> None:
    """One line when held-out documents copy kept training documents; an LmptError when a source's held-out text
    is nothing but such copies (there would be no held-out text left to validate on)."""
    several = len(copies.held_out) > 1
    for i, (held, copied) in enumerate(zip(copies.held_out, copies.copies, strict=True)):
        if held and copied == held:
            whose = f" of source {i + 1} of {len(copies.held_out)}" if several else ""
            raise LmptError(
                f"quality: all {held:,} held-out documents{whose} are copies of kept training documents, so no "
                "held-out text is left to validate on: set data.val_paths to text of its own (or use quality=none)"
            )
    if sum(copies.copies):
        console.print(
            f"[bold yellow]WARNING[/] quality: {sum(copies.copies):,} of {sum(copies.held_out):,} held-out documents "
            "are exact copies of kept training documents: left out of validation"
        )


def kept_held_out(source: Items, copies: HeldOutCopies | None) -> Iterator[tuple[str, list[str]]]:
    """The held-out documents of `source` that stay in validation (all of them when nothing was looked up)."""
    for split, doc in source():
        if split == "val" and (copies is None or copies.keeps(doc)):
            yield split, doc
