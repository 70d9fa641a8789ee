"""The quality stage between the text sources and the tokenizer: the training documents of every source go
through datatrove's dedup, filter and decontamination steps once, in a work directory of the cache keyed by the
corpus and the quality settings; the tokenizer and the token cache then see only the kept documents. Validation
text is held out before the stage, so runs with and without it are scored on the same held-out documents, except
that a deduplicating stage leaves out the held-out documents that copy a kept training document (lmpt.quality.
held_out).

Nothing is read while the token cache for the same corpus and settings exists: the settings and the tasks' n-grams
are mixed into the corpus fingerprint, and the stage runs only when its documents are first asked for."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import itertools
import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lmpt.config.quality_schema import QualityConfig, check_quality
from lmpt.console import info
from lmpt.data.split import Items
from lmpt.locks import held
from lmpt.quality.held_out import HeldOutCopies, find_copies, kept_held_out, read_copies, report_copies, write_copies
from lmpt.quality.record import RECORD_DIR, jsonl_lines, read_record, show_record, summarise, warn_if_mostly_removed

if TYPE_CHECKING:
    from lmpt.quality.decontamination import TaskItems

QUALITY_VERSION = 2  # bump when the stage's output changes for the same settings
_RUN_ONLY = ("workers", "removed_samples")  # not in the key
LOCK_NAME = ".lock"


@contextlib.contextmanager
def _exclusive(work: Path) -> Iterator[None]:
    """Hold `work`'s lock while the stage runs there: of the processes that reach the stage at once (the parts of
    `lmpt-prepare prepare.shard=i/N`, two launches on one corpus) the first runs it and the others wait, then
    reuse its record. The kernel releases the lock however its holder ends; the next one resumes from datatrove's
    completion markers."""
    work.mkdir(parents=True, exist_ok=True)
    with held(work / LOCK_NAME, f"quality: another process is running the stage in {work}: waiting for it"):
        yield


def _write_atomic(path: Path, lines: Iterator[str]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.writelines(lines)
    os.replace(tmp, path)


class QualityStage:
    """One run's quality settings and the items of the tasks it decontaminates against."""

    def __init__(self, cfg: QualityConfig, tasks: list[TaskItems]) -> None:
        check_quality(cfg)
        self.cfg = cfg
        self.tasks = tasks if cfg.decontaminate else []

    @property
    def deduplicates(self) -> bool:
        """Whether the stage removes copies (exact or MinHash): the held-out text then loses its copies too."""
        return self.cfg.exact_dedup or self.cfg.minhash

    def settings(self) -> dict[str, Any]:
        """The settings that decide which documents are kept (the run-only ones left out)."""
        return {k: v for k, v in dataclasses.asdict(self.cfg).items() if k not in _RUN_ONLY}

    @functools.cached_property
    def _hashes(self) -> dict:
        from lmpt.quality.decontamination import task_hashes  # datatrove is imported only for a quality run

        return task_hashes(self.tasks, self.cfg.decontaminate_ngram)

    @functools.cached_property
    def _tasks_fingerprint(self) -> str:
        from lmpt.quality.decontamination import index_fingerprint

        return index_fingerprint(self._hashes, self.cfg.decontaminate_ngram) if self.cfg.decontaminate else ""

    def fingerprint(self, corpus_fingerprint: str) -> str:
        """The fingerprint of the corpus after this stage: the corpus's, the settings and the tasks' n-grams."""
        key = [QUALITY_VERSION, corpus_fingerprint, self.settings(), self._tasks_fingerprint]
        return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()

    def apply(self, corpus_fingerprint: str, sources: list[Items], cache_root: Path) -> tuple[str, list[Items]]:
        """(fingerprint, items) of the corpus after this stage; running it is left to the first read."""
        fingerprint = self.fingerprint(corpus_fingerprint)
        work = self.work = Path(cache_root) / "quality" / fingerprint[:32]
        ran = functools.cache(lambda: self.run(work, sources))
        return fingerprint, [self._kept_items(work, ran, s, source) for s, source in enumerate(sources)]

    def copy_record(self, run_dir: Path) -> None:
        """Copy the record of what was removed (prepare/quality.json, removed.jsonl) into `run_dir`/prepare."""
        source = getattr(self, "work", None)
        if source is not None and (source / RECORD_DIR).is_dir():
            shutil.copytree(source / RECORD_DIR, Path(run_dir) / RECORD_DIR, dirs_exist_ok=True)

    def _kept_items(self, work: Path, ran: Any, s: int, source: Items) -> Items:
        def items() -> Iterator[tuple[str, list[str]]]:
            ranks, copies = ran()
            for rank in ranks[s]:
                for doc in jsonl_lines_of(work / "kept" / f"{rank:05d}.jsonl"):
                    lines = [line for line in doc["text"].split("\n") if line.strip()]
                    if lines:
                        yield "train", lines
            yield from kept_held_out(source, copies)

        return items

    def run(self, work: Path, sources: list[Items]) -> tuple[list[list[int]], HeldOutCopies | None]:
        """Run (or finish, or reuse) the stage in `work`, one process at a time: each source's input ranks, and the
        held-out documents that copy a kept training document (None when the stage does not deduplicate)."""
        with _exclusive(work):
            return self._run(work, sources)

    def _held_out_copies(self, work: Path, sources: list[Items]) -> HeldOutCopies | None:
        """The held-out copies of kept training documents, looked up once (held_out_copies.json) and reused."""
        if not self.deduplicates:
            return None
        copies = read_copies(work)
        if copies is None:
            copies = find_copies((doc["text"] for doc in jsonl_lines(work / "kept")), sources)
            write_copies(work, copies)
        return copies

    def _run(self, work: Path, sources: list[Items]) -> tuple[list[list[int]], HeldOutCopies | None]:
        manifest = self._write_input(work, sources)
        record = read_record(work)
        if record is not None:
            info(f"reusing quality-filtered corpus {work} ({record['documents_after']:,} documents kept)")
            warn_if_mostly_removed(record, work)
            copies = self._held_out_copies(work, sources)
            if copies is not None:
                report_copies(copies)
            return manifest["ranks"], copies
        from lmpt.quality.executors import run_stages  # datatrove's executors only when there is work
        from lmpt.quality.pipeline import build_stages

        if self.cfg.decontaminate:
            from lmpt.quality.decontamination import write_index

            write_index(self._hashes, work / "decont")
        stages = build_stages(self.cfg, work, manifest["tasks"])
        info(
            f"quality: {manifest['documents']:,} documents in {manifest['tasks']} task(s), stages: "
            f"{', '.join(s.name for s in stages)} in {work}"
        )
        started = time.perf_counter()
        run_stages(stages, work, self.cfg)
        copies = self._held_out_copies(work, sources)  # before the record, which marks the stage finished
        before = {**manifest, "seconds": round(time.perf_counter() - started, 3)}
        record = summarise(work, before, self.cfg.removed_samples, self.settings(), copies)
        show_record(record, work)
        if copies is not None:
            report_copies(copies)
        return manifest["ranks"], copies

    def _write_input(self, work: Path, sources: list[Items]) -> dict[str, Any]:
        """Every source's training documents as input/NNNNN.jsonl, `shard_docs` a file (at least one file a
        source); manifest.json last, so a killed prepare writes them again and a finished one never."""
        done = work / "input" / "manifest.json"
        try:
            return json.loads(done.read_text())
        except (OSError, ValueError):
            pass
        (work / "input").mkdir(parents=True, exist_ok=True)
        rank, documents, size, ranks = 0, 0, 0, []
        for s, source in enumerate(sources):
            train = (doc for split, doc in source() if split == "train")
            mine: list[int] = []
            i = 0
            while True:
                chunk = list(itertools.islice(train, self.cfg.shard_docs))
                if not chunk and mine:
                    break
                rows = []
                for doc in chunk:
                    text = "\n".join(doc)
                    size += len(text.encode())
                    rows.append(json.dumps({"text": text, "id": f"{s}/{i}"}, ensure_ascii=False) + "\n")
                    i += 1
                _write_atomic(work / "input" / f"{rank:05d}.jsonl", iter(rows))
                mine.append(rank)
                rank, documents = rank + 1, documents + len(chunk)
                if len(chunk) < self.cfg.shard_docs:
                    break
            ranks.append(mine)
        manifest = {"tasks": rank, "documents": documents, "bytes": size, "ranks": ranks}
        _write_atomic(done, iter([json.dumps(manifest)]))
        return manifest


def jsonl_lines_of(path: Path) -> Iterator[dict[str, Any]]:
    """The records of one kept file (none when its task kept no document and so wrote no file)."""
    if path.is_file():
        with open(path, encoding="utf-8") as f:
            yield from (json.loads(line) for line in f if line.strip())
