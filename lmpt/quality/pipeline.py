"""The datatrove stages of a quality run, in the order they must run, over one work directory:

    input/NNNNN.jsonl        the training documents, one file per datatrove task (written by lmpt)
    exact signatures -> exact duplicates                      (quality.exact_dedup)
    minhash signatures -> minhash buckets -> minhash clusters (quality.minhash)
    filter: exact dedup, MinHash dedup, Gopher repetition, Gopher quality, C4, decontamination -> kept/NNNNN.jsonl

Each filter writes what it drops to removed/STEP/. The dedup filters find a document by its position in the
stream, so every stage that reads the input sees the same documents in the same order: the MinHash signatures
are taken after the exact dedup filter, and the filter stage repeats it before the MinHash filter."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from datatrove.data import Document
from datatrove.pipeline.base import PipelineStep
from datatrove.pipeline.decont import NGramsDecontFilter
from datatrove.pipeline.dedup import (
    MinhashConfig,
    MinhashDedupBuckets,
    MinhashDedupCluster,
    MinhashDedupFilter,
    MinhashDedupSignature,
)
from datatrove.pipeline.dedup.exact_dedup import (
    ExactDedupConfig,
    ExactDedupFilter,
    ExactDedupSignature,
    ExactFindDedups,
)
from datatrove.pipeline.filters import C4QualityFilter, GopherQualityFilter, GopherRepetitionFilter
from datatrove.pipeline.readers import JsonlReader
from datatrove.pipeline.writers import JsonlWriter

from lmpt.config.quality_schema import (
    C4_OFF,
    C4_RULES,
    GOPHER_QUALITY_RULES,
    GOPHER_REPETITION_OFF,
    GOPHER_REPETITION_RULES,
    QualityConfig,
    gopher_quality_off,
    minhash_rows,
    rule_arguments,
)
from lmpt.quality.decontamination import decont_config
from lmpt.quality.words import WORDS


@dataclass(frozen=True)
class Stage:
    """One datatrove executor's worth of work: its steps and how many tasks split it."""

    name: str
    steps: list[PipelineStep]
    tasks: int


def document_text(doc: Document) -> bytes:
    """What exact dedup compares: the whole text, as bytes (its return annotation tells datatrove which)."""
    return doc.text.encode()


document_text.__annotations__["return"] = bytes  # the type itself, not the string `from __future__` makes of it


def _reader(work: Path) -> JsonlReader:
    return JsonlReader(str(work / "input"), glob_pattern="*.jsonl", compression=None, add_file_path=False)


def _removed(work: Path, step: str) -> JsonlWriter:
    return JsonlWriter(str(work / "removed" / step), output_filename="${rank}.jsonl", compression=None)


def minhash_config(cfg: QualityConfig) -> MinhashConfig:
    """datatrove's MinHash settings: the n-gram size, the bands and the rows the threshold asks for."""
    rows = minhash_rows(cfg.minhash_threshold, cfg.minhash_bands)
    return MinhashConfig(n_grams=cfg.minhash_ngram, num_buckets=cfg.minhash_bands, hashes_per_bucket=rows)


def _exact_filter(work: Path, exclusions: bool) -> ExactDedupFilter:
    writer = _removed(work, "exact_dedup") if exclusions else None
    return ExactDedupFilter(str(work / "exact" / "dups"), ExactDedupConfig(document_text), exclusion_writer=writer)


def _filters(cfg: QualityConfig, work: Path) -> list[PipelineStep]:
    """The filter stage's steps after the reader, the kept documents' writer last."""
    steps: list[PipelineStep] = []
    if cfg.exact_dedup:
        steps.append(_exact_filter(work, exclusions=True))
    if cfg.minhash:
        steps.append(MinhashDedupFilter(str(work / "minhash" / "clusters"), exclusion_writer=_removed(work, "minhash")))
    if cfg.gopher_repetition:
        arguments = rule_arguments(GOPHER_REPETITION_RULES, GOPHER_REPETITION_OFF, cfg.gopher_repetition)
        steps.append(
            GopherRepetitionFilter(**arguments, exclusion_writer=_removed(work, "gopher_repetition"), language=WORDS)
        )
    if cfg.gopher_quality:
        arguments = rule_arguments(GOPHER_QUALITY_RULES, gopher_quality_off(), cfg.gopher_quality)
        writer = _removed(work, "gopher_quality")
        steps.append(GopherQualityFilter(**arguments, exclusion_writer=writer, language=WORDS))
    if cfg.c4:
        arguments = rule_arguments(C4_RULES, C4_OFF, cfg.c4)
        steps.append(C4QualityFilter(**arguments, exclusion_writer=_removed(work, "c4"), language=WORDS))
    if cfg.decontaminate:
        steps.append(
            NGramsDecontFilter(
                str(work / "decont"),
                decont_config(cfg.decontaminate_ngram),
                exclusion_writer=_removed(work, "decontaminate"),
                language=WORDS,
            )
        )
    steps.append(JsonlWriter(str(work / "kept"), output_filename="${rank}.jsonl", compression=None))
    return steps


def build_stages(cfg: QualityConfig, work: Path, tasks: int) -> list[Stage]:
    """Every stage `cfg` needs over `tasks` input files, in the order they must run."""
    stages: list[Stage] = []
    exact = ExactDedupConfig(document_text)
    if cfg.exact_dedup:
        signatures = ExactDedupSignature(str(work / "exact" / "sigs"), exact)
        stages.append(Stage("exact signatures", [_reader(work), signatures], tasks))
        finder = ExactFindDedups(str(work / "exact" / "sigs"), str(work / "exact" / "dups"), exact)
        stages.append(Stage("exact duplicates", [finder], 1))
    if cfg.minhash:
        config = minhash_config(cfg)
        before = [_exact_filter(work, exclusions=False)] if cfg.exact_dedup else []
        signature = MinhashDedupSignature(str(work / "minhash" / "sigs"), config, language=WORDS)
        stages.append(Stage("minhash signatures", [_reader(work), *before, signature], tasks))
        buckets = MinhashDedupBuckets(str(work / "minhash" / "sigs"), str(work / "minhash" / "buckets"), config=config)
        stages.append(Stage("minhash buckets", [buckets], config.num_buckets))
        cluster = MinhashDedupCluster(str(work / "minhash" / "buckets"), str(work / "minhash" / "clusters"), config)
        stages.append(Stage("minhash clusters", [cluster], 1))
    stages.append(Stage("filter", [_reader(work), *_filters(cfg, work)], tasks))
    return stages
