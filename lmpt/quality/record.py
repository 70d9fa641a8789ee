"""What a quality run removed and why: counts per step and reason, bytes before and after, and a sample of the
dropped documents. Written into the work directory's prepare/ (quality.json, removed.jsonl; a training run
copies them into its run directory's prepare/) and shown as a rich table."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.table import Table

from lmpt.config.quality_schema import FILTER_STEPS
from lmpt.console import console, print_whole

if TYPE_CHECKING:
    from lmpt.quality.held_out import HeldOutCopies

RECORD_DIR = "prepare"
RECORD_NAME = "quality.json"
REMOVED_NAME = "removed.jsonl"
_SAMPLE_CHARS = 2000
MOSTLY_REMOVED = 0.1
"""Below this share of the documents kept, the stage warns: the corpus was mostly copies, or the filters misfit it."""


def jsonl_lines(folder: Path) -> Iterator[dict[str, Any]]:
    """Every record of the folder's .jsonl files, file by file in name order."""
    for path in sorted(folder.glob("*.jsonl")) if folder.is_dir() else []:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    yield json.loads(line)


def _reason(step: str, doc: dict[str, Any]) -> str:
    metadata = doc.get("metadata") or {}
    if step == "decontaminate":
        return f"contaminated:{metadata.get('contaminated_task', '?')}"
    return str(metadata.get("filter_reason") or ("duplicate" if step in ("exact_dedup", "minhash") else step))


def summarise(
    work: Path, before: dict[str, int], samples: int, settings: dict[str, Any], copies: HeldOutCopies | None = None
) -> dict[str, Any]:
    """Count what each step dropped (from removed/STEP/), measure what is kept (kept/), keep up to `samples`
    dropped documents per (step, reason) in prepare/removed.jsonl; with `copies` (a deduplicating stage) also the
    held-out documents and how many of them copy a kept training document; write prepare/quality.json last."""
    out = work / RECORD_DIR
    out.mkdir(parents=True, exist_ok=True)
    counts: Counter[tuple[str, str]] = Counter()
    dropped_bytes: Counter[str] = Counter()
    with open(out / REMOVED_NAME, "w", encoding="utf-8") as sample_file:
        for step in FILTER_STEPS:
            for doc in jsonl_lines(work / "removed" / step):
                reason = _reason(step, doc)
                counts[step, reason] += 1
                dropped_bytes[step] += len(doc["text"].encode())
                if counts[step, reason] <= samples:
                    row = {"step": step, "reason": reason, "id": doc.get("id"), "text": doc["text"][:_SAMPLE_CHARS]}
                    sample_file.write(json.dumps(row, ensure_ascii=False) + "\n")
    kept_docs = kept_bytes = 0
    for doc in jsonl_lines(work / "kept"):
        kept_docs += 1
        kept_bytes += len(doc["text"].encode())
    removed = [{"step": s, "reason": r, "documents": n} for (s, r), n in sorted(counts.items(), key=_step_order)]
    record = {
        "settings": settings,
        "documents_before": before["documents"],
        "documents_after": kept_docs,
        "bytes_before": before["bytes"],
        "bytes_after": kept_bytes,
        "removed": removed,
        "removed_bytes": dict(dropped_bytes),
        "seconds": before.get("seconds"),
    }
    if copies is not None:
        record |= {"held_out_documents": sum(copies.held_out), "held_out_copies": sum(copies.copies)}
    tmp = out / f".{RECORD_NAME}.tmp"
    tmp.write_text(json.dumps(record, indent=2) + "\n")
    tmp.replace(out / RECORD_NAME)
    return record


def _step_order(item: tuple[tuple[str, str], int]) -> tuple[int, str]:
    (step, reason), _ = item
    return FILTER_STEPS.index(step), reason


def read_record(work: Path) -> dict[str, Any] | None:
    """The finished record of a quality run in `work`, or None when the run has not finished."""
    try:
        return json.loads((work / RECORD_DIR / RECORD_NAME).read_text())
    except (OSError, ValueError):
        return None


def warn_if_mostly_removed(record: dict[str, Any], where: Path) -> None:
    """One line when the stage kept under MOSTLY_REMOVED of the documents, with the counts."""
    before, after = record["documents_before"], record["documents_after"]
    if before and after < MOSTLY_REMOVED * before:
        console.print(
            f"[bold yellow]WARNING[/] quality kept {after:,} of {before:,} documents ({after / before:.1%}): the "
            f"corpus is mostly copies or the filters misfit it; see {where / RECORD_DIR / REMOVED_NAME}"
        )


def show_record(record: dict[str, Any], where: Path) -> None:
    """The final table: documents and bytes removed per step and reason, then the totals."""
    table = Table(title="data quality: what was removed and why", title_justify="left")
    for column in ("step", "reason", "documents", "share"):
        table.add_column(column, justify="right" if column in ("documents", "share") else "left")
    total = max(1, record["documents_before"])
    for row in record["removed"]:
        table.add_row(row["step"], row["reason"], f"{row['documents']:,}", f"{row['documents'] / total:.1%}")
    table.add_row(
        "kept", "", f"{record['documents_after']:,}", f"{record['documents_after'] / total:.1%}", style="bold"
    )
    print_whole(table)
    mb_before, mb_after = record["bytes_before"] / 1e6, record["bytes_after"] / 1e6
    console.print(
        f"quality: {record['documents_before']:,} documents ({mb_before:.2f} MB) -> "
        f"{record['documents_after']:,} ({mb_after:.2f} MB); record: {where / RECORD_DIR}"
    )
    warn_if_mostly_removed(record, where)
