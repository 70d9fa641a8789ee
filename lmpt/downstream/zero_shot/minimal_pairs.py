"""Zero-shot minimal pairs (`lmpt-eval RUN task=bundled:blimp-fast`; BLiMP, Warstadt et al. 2020): the model
scores both sentences of a pair, and the pair is right when the acceptable one scores strictly higher: a tie (both
sentences scoring the same, as two identical sentences do) is wrong, never a coin flip or half a point, and the
result counts the ties apart (`ties`, overall, on equal-length pairs, per field and per paradigm): the rule proposed
for the BabyLM 2025 pipeline (babylm/evaluation-pipeline-2025 issue 34, pull request 35), whose torch.max gave each
tie to the first, acceptable sentence and inflated accuracies.

Each sentence is scored as lmpt-eval scores a multiple-choice choice after an empty context
(lmpt.downstream.zero_shot.multiple_choice, as lm-evaluation-harness scores its blimp tasks):

- Decoders: the total log-likelihood of the sentence's tokens after eos (the start of every training document);
  prefix and ul2-mixture runs in their own frames.
- Encoder-decoders (span, ul2-mixture): the decoder's log-likelihood of the sentence as the target of the framed
  empty input (span: <extra_id_0> eos, the sentence filling the one span).
- Encoders (mlm, nsp): the pseudo-log-likelihood (Salazar et al. 2020), batched across sentences
  (lmpt.inference.sentence_pll); `within_word` masks the rest of the scored token's word too (Kauf & Ivanova 2023).
- An objective with its own way of scoring (Objective.choice_scorer) scores each sentence by it as a choice after
  an empty context. mdlm: minus the sentence's diffusion bound over fixed draws (LLaDA), every token of the sentence
  maskable, the eos before it visible.

The figures: accuracy with a 95% bootstrap interval over pairs (lmpt.downstream.significance) overall, per field, per
paradigm (UID), and on the pairs whose two sentences have the same number of tokens, where preferring the shorter
sentence cannot help; beside them chance (0.5) and the length baseline (pick the sentence of fewer tokens, a tie
counting half: the expected score of a coin flip, the baseline being a rule, not a model).

The scores are float32 log-probabilities (lmpt.model.head computes the cross-entropy in float32 whatever the body's
dtype) summed per sentence in float64, so rounding makes no tie that float32 would not."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import torch
from rich.table import Table

from lmpt.console import console
from lmpt.downstream.figures import ACCURACY, CHANCE, EQUAL_LENGTH_ACCURACY, EQUAL_LENGTH_PAIRS
from lmpt.downstream.significance import (
    ITEMS_DIGEST,
    LEVEL,
    RESAMPLES,
    SEED,
    accuracy_with_interval,
    encode_outcomes,
    figure_outcomes,
    items_digest,
)
from lmpt.downstream.tasks.choice_tasks import ChoiceQuestion, MinimalPair
from lmpt.downstream.zero_shot.multiple_choice import choice_scores, own_scorer, reading_of, split_tokens
from lmpt.inference.progress import WorkBar
from lmpt.inference.sentence_pll import copy_tokens, framed_ids, text_plls
from lmpt.objectives.base import Reading
from lmpt.rundir.trained import Trained

EQUAL_LENGTH = "equal_length"
LENGTH_BASELINE = "length_baseline"
TIES = "ties"
"""Pairs whose two sentences scored the same: counted wrong, and counted here (records before it hold no count)."""
PAIR_FIGURES = (ACCURACY, EQUAL_LENGTH_ACCURACY, CHANCE, LENGTH_BASELINE)
"""The minimal-pair figures logged after training (`logged_figures`)."""


def sentence_tokens(trained: Trained, sentence: str) -> list[int]:
    """The ids of `sentence` that the run scores: encoders' PLL its framed text, the others the choice's tokens after
    an empty context (multiple_choice.split_tokens)."""
    if reading_of(trained) is Reading.PSEUDO_LIKELIHOOD:
        return framed_ids(trained, sentence)
    return split_tokens(trained, "", sentence)[1]


def pair_questions(pairs: list[MinimalPair]) -> list[ChoiceQuestion]:
    """Each pair as a decoder or encoder-decoder scores it: two choices after an empty context."""
    return [ChoiceQuestion("", (p.good, p.bad), 0) for p in pairs]


def pair_scores(
    trained: Trained, pairs: list[MinimalPair], batch_size: int, device, bar: WorkBar, within_word: bool = False
) -> tuple[list[float], list[float]]:
    """(good scores, bad scores): each sentence's log-likelihood, pseudo-log-likelihood for encoders, or the score
    of the objective's own way (as a choice after an empty context)."""
    if reading_of(trained) is not Reading.PSEUDO_LIKELIHOOD:
        scores = choice_scores(trained, pair_questions(pairs), batch_size, device, bar)
        return [s[0] for s in scores], [s[1] for s in scores]
    rows = [framed_ids(trained, s) for p in pairs for s in (p.good, p.bad)]
    bar.start(copy_tokens(trained, rows))
    flat = text_plls(trained, rows, batch_size, device, bar, within_word)
    return flat[0::2], flat[1::2]


def _with_ties(correct: np.ndarray, tied: np.ndarray) -> dict:
    """Accuracy with its interval over the pairs given, and how many of them were ties (each counted wrong)."""
    return {**accuracy_with_interval(correct), TIES: int(tied.sum())}


def _groups(keys: list[str], correct: np.ndarray, tied: np.ndarray) -> dict[str, dict]:
    members: dict[str, list[int]] = defaultdict(list)
    for i, key in enumerate(keys):
        members[key].append(i)
    return {key: _with_ties(correct[members[key]], tied[members[key]]) for key in sorted(members)}


def pair_figures(
    pairs: list[MinimalPair], good: list[float], bad: list[float], good_tokens: list[int], bad_tokens: list[int]
) -> dict:
    """Accuracy (good > bad: a tie is wrong) with its interval and the count of ties, overall, on equal-length pairs,
    per field and per paradigm; chance and the length baseline. Plain JSON types."""
    good_scores, bad_scores = np.asarray(good, dtype=np.float64), np.asarray(bad, dtype=np.float64)
    correct = (good_scores > bad_scores).astype(np.float64)
    tied = good_scores == bad_scores
    g_len, b_len = np.asarray(good_tokens), np.asarray(bad_tokens)
    overall = accuracy_with_interval(correct)
    equal = _with_ties(correct[g_len == b_len], tied[g_len == b_len])
    by_length = np.where(g_len == b_len, 0.5, (g_len < b_len).astype(np.float64))
    return {
        "n": overall["n"],
        ACCURACY: overall[ACCURACY],
        "interval": overall["interval"],
        TIES: int(tied.sum()),
        CHANCE: 0.5,
        EQUAL_LENGTH_ACCURACY: equal[ACCURACY],
        EQUAL_LENGTH: equal,
        LENGTH_BASELINE: float(by_length.mean()),
        "fields": _groups([p.field for p in pairs], correct, tied),
        "paradigms": _groups([p.paradigm for p in pairs], correct, tied),
        "bootstrap": {"level": LEVEL, "resamples": RESAMPLES, "seed": SEED, "over": "pairs"},
        **figure_outcomes(ACCURACY, correct, overall["interval"]),  # per-pair outcomes: lmpt-compare pairs runs
        EQUAL_LENGTH_PAIRS: encode_outcomes(g_len == b_len),
        ITEMS_DIGEST: items_digest(f"{p.good}\x1f{p.bad}" for p in pairs),
    }


def method_of(trained: Trained, within_word: bool) -> str:
    """How the run's sentences are scored, in words."""
    scorer = own_scorer(trained)
    if scorer is not None:
        return f"{scorer.method} of each sentence after an empty context (every token of it masked)"
    reading = reading_of(trained)
    if reading is Reading.PSEUDO_LIKELIHOOD:
        return "pseudo-log-likelihood of each sentence" + (" (within-word l2r masking)" if within_word else "")
    if reading is Reading.ENCODER_DECODER:
        return "decoder log-likelihood of each sentence after an empty input"
    return "log-likelihood of each sentence after eos"


def evaluate_pairs(
    trained: Trained,
    pairs: list[MinimalPair],
    batch_size: int,
    hidden: bool,
    within_word: bool = False,
    task: str = "",
) -> dict:
    """The figures of a minimal-pair task, with the method, under a progress bar naming `task` unless `hidden`."""
    device = trained.model.head_weight.device
    counts_tokens = reading_of(trained) in (Reading.PSEUDO_LIKELIHOOD, Reading.OWN)
    unit = "tokens" if counts_tokens else "sentences"  # what pair_scores counts
    with torch.inference_mode(), WorkBar(f"{task} zero-shot".lstrip(), hidden=hidden, unit=unit) as bar:
        good, bad = pair_scores(trained, pairs, batch_size, device, bar, within_word)
    good_tokens = [len(sentence_tokens(trained, p.good)) for p in pairs]
    bad_tokens = [len(sentence_tokens(trained, p.bad)) for p in pairs]
    return {
        "arch": trained.arch,
        "objective": trained.objective_name,
        "method": method_of(trained, within_word),
        **pair_figures(pairs, good, bad, good_tokens, bad_tokens),
    }


def logged_figures(result: dict) -> dict[str, float]:
    """The figures of a result that go into metrics.jsonl (PAIR_FIGURES; one with no value, e.g. no pair of equal
    length, is left out)."""
    return {k: float(result[k]) for k in PAIR_FIGURES if result.get(k) is not None}


def _row(table: Table, name: str, group: dict) -> None:
    ties = f"{group[TIES]:,}" if TIES in group else "-"  # a record written before ties were counted
    if group["n"] == 0:
        table.add_row(name, "0", "-", "-", ties)
        return
    low, high = group["interval"]
    table.add_row(name, f"{group['n']:,}", f"{group[ACCURACY]:.4f}", f"{low:.3f}-{high:.3f}", ties)


def _columns(table: Table, first: str, level: str) -> None:
    for name, justify in ((first, "left"), ("n", "right"), (ACCURACY, "right"), (f"{level} interval", "right")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    table.add_column("ties (wrong)", justify="right")


def render_pairs(result: dict) -> None:
    """The figures of a minimal-pair task as rich tables on the console: the summary, then per field and paradigm."""
    level = f"{result['bootstrap']['level']:.0%}"
    title = f"lmpt-eval task={result.get('task', '?')}: {result['objective']} {result['arch']}"
    summary = Table(title=f"{title} ({result['method']})", title_justify="left")
    _columns(summary, "pairs", level)
    _row(summary, "all", result)
    _row(summary, "equal token length", result[EQUAL_LENGTH])
    summary.add_row(CHANCE, "", f"{result[CHANCE]:.4f}", "", "")
    summary.add_row("length baseline (fewer tokens wins)", "", f"{result[LENGTH_BASELINE]:.4f}", "", "")
    console.print(summary)
    for key, heading in (("fields", "field"), ("paradigms", "paradigm (UID)")):
        if len(result[key]) < 2:
            continue
        table = Table(title=f"per {heading}", title_justify="left")
        _columns(table, heading, level)
        for name, group in result[key].items():
            _row(table, name, group)
        console.print(table)
