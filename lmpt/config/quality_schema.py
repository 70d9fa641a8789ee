"""The `quality` config group's typed keys (none, dedup, web) and the checks their types cannot express.

Every rule of the Gopher and C4 heuristic filters is named here once: a rule listed in `quality.gopher_quality`,
`quality.gopher_repetition` or `quality.c4` is on, any other is off (datatrove turns a rule off when its setting
is None or -1)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from lmpt.errors import LmptError

# rule name -> the datatrove GopherQualityFilter arguments it owns (their values when on: Gopher's own)
GOPHER_QUALITY_RULES: dict[str, dict[str, Any]] = {
    "doc_words": {"min_doc_words": 50, "max_doc_words": 100_000},
    "avg_word_length": {"min_avg_word_length": 3, "max_avg_word_length": 10},
    "symbol_word_ratio": {"max_symbol_word_ratio": 0.1},
    "bullet_lines": {"max_bullet_lines_ratio": 0.9},
    "ellipsis_lines": {"max_ellipsis_lines_ratio": 0.3},
    "non_alpha_words": {"max_non_alpha_words_ratio": 0.8},
    "stop_words": {"min_stop_words": 2},
}
GOPHER_REPETITION_RULES: dict[str, dict[str, Any]] = {
    "dup_line_frac": {"dup_line_frac": 0.3},
    "dup_para_frac": {"dup_para_frac": 0.3},
    "dup_line_char_frac": {"dup_line_char_frac": 0.2},
    "dup_para_char_frac": {"dup_para_char_frac": 0.2},
    "top_n_grams": {"top_n_grams": ((2, 0.2), (3, 0.18), (4, 0.16))},
    "dup_n_grams": {"dup_n_grams": ((5, 0.15), (6, 0.14), (7, 0.13), (8, 0.12), (9, 0.11), (10, 0.10))},
}
GOPHER_REPETITION_OFF: dict[str, Any] = {
    "dup_line_frac": None,
    "dup_para_frac": None,
    "dup_line_char_frac": None,
    "dup_para_char_frac": None,
    "top_n_grams": (),
    "dup_n_grams": (),
}
C4_RULES: dict[str, dict[str, Any]] = {
    "terminal_punct": {"filter_no_terminal_punct": True},
    "min_sentences": {"min_num_sentences": 5},
    "min_words_per_line": {"min_words_per_line": 3},
    "max_word_length": {"max_word_length": 1000},
    "lorem_ipsum": {"filter_lorem_ipsum": True},
    "javascript": {"filter_javascript": True},
    "curly_bracket": {"filter_curly_bracket": True},
    "policy": {"filter_policy": True},
    "citations": {"remove_citations": True},
}
C4_OFF: dict[str, Any] = {
    "filter_no_terminal_punct": False,
    "min_num_sentences": -1,
    "min_words_per_line": -1,
    "max_word_length": -1,
    "filter_lorem_ipsum": False,
    "filter_javascript": False,
    "filter_curly_bracket": False,
    "filter_policy": False,
    "remove_citations": False,
}
RULE_GROUPS = {"gopher_quality": GOPHER_QUALITY_RULES, "gopher_repetition": GOPHER_REPETITION_RULES, "c4": C4_RULES}
# the filter steps in the order they run, as named in removed/ and the record
FILTER_STEPS = ("exact_dedup", "minhash", "gopher_repetition", "gopher_quality", "c4", "decontaminate")
_MAX_ROWS = 64  # rows per band beyond this change nothing a threshold below 1 can tell


@dataclass
class QualityConfig:
    exact_dedup: bool = False
    """Drop every document whose text equals an earlier one's (datatrove ExactDedupSignature/FindDedups/Filter)."""
    minhash: bool = False
    """Drop near-duplicate documents: MinHash LSH over word n-grams (datatrove MinhashDedupSignature/Buckets/
    Cluster/Filter); one document of each cluster is kept."""
    minhash_threshold: float = 0.72
    """Jaccard similarity of n-gram sets from which two documents count as near-duplicates, in (0, 1]: sets the
    rows per band to round(ln(bands) / -ln(threshold)) (14 bands and 0.72 give FineWeb's 14 x 8)."""
    minhash_ngram: int = 5
    """Words per shingle of the MinHash signature."""
    minhash_bands: int = 14
    """LSH bands (buckets): more bands find more pairs below the threshold, at more memory and time."""
    gopher_quality: list[str] = field(default_factory=list)
    """Gopher quality rules that are on: doc_words, avg_word_length, symbol_word_ratio, bullet_lines,
    ellipsis_lines, non_alpha_words, stop_words (datatrove GopherQualityFilter, Gopher's thresholds)."""
    gopher_repetition: list[str] = field(default_factory=list)
    """Gopher repetition rules that are on: dup_line_frac, dup_para_frac, dup_line_char_frac, dup_para_char_frac,
    top_n_grams, dup_n_grams (datatrove GopherRepetitionFilter)."""
    c4: list[str] = field(default_factory=list)
    """C4 rules that are on: terminal_punct, min_sentences, min_words_per_line, max_word_length, lorem_ipsum,
    javascript, curly_bracket, policy, citations (datatrove C4QualityFilter; some drop lines, not documents)."""
    decontaminate: bool = False
    """Drop training documents that share an n-gram with an item of the run's downstream tasks
    (downstream.tasks: a fine-tuned task's dev and test) or of `decontaminate_tasks`."""
    decontaminate_ngram: int = 13
    """Words per n-gram of decontamination (13: GPT-3's and lm-eval's choice)."""
    decontaminate_tasks: list[str] = field(default_factory=list)
    """More tasks to decontaminate against: multiple-choice .jsonl files, bundled:NAME, or classification folders."""
    workers: int = 0
    """Processes running the steps on this machine (datatrove LocalPipelineExecutor); 0 = every core this process
    may use (in a SLURM job: its --cpus-per-task, hydra.launcher.cpus_per_task)."""
    shard_docs: int = 20000
    """Documents per datatrove task: the unit each step runs on and that a killed prepare keeps when done."""
    removed_samples: int = 20
    """Dropped documents kept per rule in prepare/removed.jsonl."""

    @property
    def active(self) -> bool:
        """Whether any step would touch the corpus."""
        return self.exact_dedup or self.minhash or self.decontaminate or any(getattr(self, g) for g in RULE_GROUPS)


def minhash_rows(threshold: float, bands: int) -> int:
    """Rows (hashes) per band whose LSH curve turns at `threshold`: (1/bands)^(1/rows) ~ threshold."""
    if threshold >= 1.0:
        return _MAX_ROWS
    return max(1, min(_MAX_ROWS, round(math.log(bands) / -math.log(threshold))))


def check_quality(cfg: QualityConfig) -> None:
    """Each value the types allow but the pipeline cannot use is one LmptError naming the key."""
    for group, rules in RULE_GROUPS.items():
        for rule in getattr(cfg, group):
            if rule not in rules:
                raise LmptError(f"quality.{group}: unknown rule '{rule}' (rules: {', '.join(rules)})")
    if not (0.0 < cfg.minhash_threshold <= 1.0) or math.isnan(cfg.minhash_threshold):
        raise LmptError(f"quality.minhash_threshold={cfg.minhash_threshold} is invalid: it must be in (0, 1]")
    for key in ("minhash_ngram", "minhash_bands", "decontaminate_ngram", "shard_docs"):
        if getattr(cfg, key) < 1:
            raise LmptError(f"quality.{key}={getattr(cfg, key)} is invalid: it must be >= 1")
    for key in ("workers", "removed_samples"):
        if getattr(cfg, key) < 0:
            raise LmptError(f"quality.{key}={getattr(cfg, key)} is invalid: it must be >= 0")


def rule_arguments(rules: dict[str, dict[str, Any]], off: dict[str, Any], chosen: list[str]) -> dict[str, Any]:
    """The filter's keyword arguments with exactly the `chosen` rules on."""
    arguments = dict(off)
    for rule in chosen:
        arguments.update(rules[rule])
    return arguments


def gopher_quality_off() -> dict[str, Any]:
    """GopherQualityFilter's arguments with every rule off."""
    return {name: None for rule in GOPHER_QUALITY_RULES.values() for name in rule}
