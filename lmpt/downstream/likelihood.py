"""Zero-shot multiple choice (`lmpt-eval RUN task=FILE.jsonl`): every choice of a record is scored by the model,
the highest score is its answer. As lm-evaluation-harness scores `multiple_choice` tasks:

- The text scored is context + " " + choice (lm_eval's default `target_delimiter`, a space); the choice's tokens
  are those of the whole text beyond the tokens of the context alone (lm_eval's `_encode_pair`: trailing
  whitespace of the context moves to the continuation), so a sentencepiece "▁word" piece belongs to the choice.
- Decoders (clm, mtp, fim, gpt-bert): log P(choice tokens | eos + context tokens), causal: a decoder reads every
  text after eos, as every training document starts and as lmpt-generate reads a prompt; an empty context is eos
  alone. lm_eval's defaults read the same from an lmpt export, whose tokenizer puts `</s>` (its declared bos)
  before every text it encodes, and which starts an empty context from that bos. prefix runs see eos + context
  as their bidirectional prefix; ul2-mixture runs see [S2S] + context as the prefix (decoder) or encoder input.
- Encoder-decoders (span): the encoder reads context + <extra_id_0> + eos, the decoder scores
  <extra_id_0> choice, the choice's tokens only (T5's way of filling a span).
- Encoders (mlm, nsp): by default the conditional pseudo-log-likelihood of the choice (Salazar et al. 2020's PLL,
  conditioned as lm_eval conditions a decoder): each of the choice's tokens is masked in turn, one copy each, with
  the context read whole and never masked, the encoder's log P(choice | context). `choice_pll="whole"` scores every
  token of context + choice instead (the filled text's PLL, lmpt's method before issue 31): the context's tokens
  then count too, each read beside the choice, 18x the copies on the bundled cloze task. Either way the copies
  are batched across choices and questions (lmpt.inference.sentence_pll).
- An objective with its own way (Objective.choice_scorer) is scored by it instead. mdlm: minus the diffusion bound
  of the choice, as LLaDA evaluates, over fixed draws of masks over the choice's tokens, the objective's frame (eos,
  the context) read whole and never masked (lmpt.objectives.mdlm.BoundScorer).

`accuracy` takes the highest score (lm_eval's acc); `accuracy_norm` the highest score per UTF-8 byte of the
choice (lm_eval's acc_bytes; its acc_norm divides by characters, the same on ASCII text); chance is the mean of
1 / number of choices. Each accuracy comes with its 95% bootstrap interval over questions and the per-question
outcomes that let lmpt-compare pair two runs (lmpt.downstream.significance).

Zero-shot minimal pairs (`lmpt-eval RUN task=bundled:blimp-fast`; BLiMP, Warstadt et al. 2020): the model
scores both sentences of a pair, and the pair is right when the acceptable one scores strictly higher: a tie (both
sentences scoring the same, as two identical sentences do) is wrong, never a coin flip or half a point, and the
result counts the ties apart (`ties`, overall, on equal-length pairs, per field and per paradigm): the rule proposed
for the BabyLM 2025 pipeline (babylm/evaluation-pipeline-2025 issue 34, pull request 35), whose torch.max gave each
tie to the first, acceptable sentence and inflated accuracies.

Each sentence is scored as lmpt-eval scores a multiple-choice choice after an empty context
(lmpt.downstream.likelihood, as lm-evaluation-harness scores its blimp tasks):

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
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch

from lmpt.batch import IGNORE, Batch
from lmpt.config.schema import ChoicePll
from lmpt.downstream.figures import (
    ACCURACY,
    ACCURACY_NORM,
    CHANCE,
    EQUAL_LENGTH,
    EQUAL_LENGTH_ACCURACY,
    EQUAL_LENGTH_PAIRS,
    LENGTH_BASELINE,
    TIES,
)
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
from lmpt.downstream.zero_shot_files import ChoiceQuestion, MinimalPair
from lmpt.errors import LmptError
from lmpt.inference.progress import WorkBar
from lmpt.inference.sentence_pll import copy_tokens, framed_continuation, framed_ids, text_plls
from lmpt.objectives.base import ChoiceScorer, Objective, Reading
from lmpt.objectives.sequences import pad_rows
from lmpt.rundir.trained import Trained
from lmpt.tokenizer.base import Tokenizer

DELIMITER = " "
"""Between context and choice, as lm_eval's default target_delimiter."""
CHOICE_PLL = tuple(ChoicePll.__members__)
"""How an encoder scores a choice (module docstring): the default first."""


@dataclass(frozen=True)
class Framed:
    """One choice laid out for the model: `source` is what the model reads first (the decoder's prefix or the
    encoder's input), `target` what it predicts after; the first `skip` target tokens are not scored."""

    source: list[int]
    target: list[int]
    skip: int = 0


class Framing(Protocol):
    """What framing a choice asks of a run: a trained one (lmpt.rundir.trained.Trained), or before training its
    tokenizer and objective (`RunFraming`), so a choice that cannot fit is refused before any training."""

    @property
    def tokenizer(self) -> Tokenizer: ...

    @property
    def objective(self) -> type[Objective]: ...

    @property
    def arch(self) -> str: ...

    @property
    def max_seq_len(self) -> int: ...


@dataclass(frozen=True)
class RunFraming:
    """A run's `Framing` before it has weights: its tokenizer, objective class, architecture and max_seq_len."""

    tokenizer: Tokenizer
    objective: type[Objective]
    arch: str
    max_seq_len: int


def split_tokens(run: Framing, context: str, choice: str) -> tuple[list[int], list[int]]:
    """(context ids, choice ids) as lm_eval's _encode_pair splits context + delimiter + choice."""
    continuation = DELIMITER + choice
    stripped = context.rstrip()
    continuation, context = context[len(stripped) :] + continuation, stripped
    whole = run.tokenizer.encode(context + continuation)
    context_ids = run.tokenizer.encode(context) if context else []
    return context_ids, whole[len(context_ids) :]


def frame(run: Framing, context_ids: list[int], choice_ids: list[int]) -> Framed:
    """The choice in the form the run's objective trained on (module docstring; Objective.scoring_frame), the
    context cut from the left (as lm_eval truncates) where the whole would not fit the model."""
    special, max_len = run.tokenizer.special, run.max_seq_len
    before, context_ids, after, target, skip = run.objective.scoring_frame(special, context_ids, choice_ids)
    causal = run.objective.reading(run.arch) is Reading.CAUSAL  # the target shares the decoder's positions
    room = (max_len - len(target) + 1 if causal else max_len) - len(before) - len(after)
    if room < 1 or len(target) > max_len:
        raise LmptError(
            f"a choice of {len(choice_ids)} tokens does not fit the model's max_seq_len={max_len}: shorten it"
        )
    return Framed([*before, *context_ids[-room:], *after], target, skip)


def framed_choices(run: Framing, questions: list[ChoiceQuestion]) -> list[Framed]:
    """Every choice of every question `frame`d, in order: what a decoder or encoder-decoder scores. A choice that
    cannot fit is refused naming its record (which of thousands is too long?)."""
    rows = []
    for q in questions:
        for choice in q.choices:
            context_ids, choice_ids = split_tokens(run, q.context, choice)
            try:
                rows.append(frame(run, context_ids, choice_ids))
            except LmptError as e:
                raise LmptError(f"{q.where}: {e}" if q.where else str(e)) from None
    return rows


def reading_of(trained: Trained) -> Reading:
    """How the run's objective reads a choice (Objective.reading), at the run's architecture."""
    return trained.objective.reading(trained.arch)


def own_scorer(trained: Trained) -> ChoiceScorer | None:
    """The way the run's objective scores a choice itself (Objective.choice_scorer, from the run's objective
    settings); None: scored by its architecture."""
    return trained.objective.choice_scorer(trained.config.get("objective"), trained.tokenizer)  # None: no settings


def whole_rows(run: Framing, questions: list[ChoiceQuestion]) -> tuple[list[list[int]], list[int]]:
    """(ids, scored_from) of every choice of every question in one sequence, as a single bidirectional stack reads
    it: the objective's scoring frame then the choice, cut from the left to fit the model (as encoders cut), scored
    from the choice's first token (after `skip`)."""
    rows, starts = [], []
    for q in questions:
        for choice in q.choices:
            before, context, after, target, skip = run.objective.scoring_frame(
                run.tokenizer.special, *split_tokens(run, q.context, choice)
            )
            ids = [*before, *context, *after, *target][-run.max_seq_len :]
            rows.append(ids)
            starts.append(max(0, len(ids) - len(target) + skip))
    return rows, starts


def choice_batch(trained: Trained, rows: list[Framed]) -> Batch:
    """One batch of framed choices, padded to the longest."""
    special = trained.tokenizer.special
    if reading_of(trained) is Reading.ENCODER_DECODER:
        labels = [torch.tensor([IGNORE] * r.skip + r.target[r.skip :]) for r in rows]
        decoder_inputs = [torch.tensor([special.bos, *r.target[:-1]]) for r in rows]
        return Batch(
            input_ids=pad_rows([torch.tensor(r.source) for r in rows], max(len(r.source) for r in rows), special.pad),
            labels=pad_rows(labels, max(len(r.target) for r in rows), IGNORE),
            attention="bidirectional",
            decoder_input_ids=pad_rows(decoder_inputs, max(len(r.target) for r in rows), special.pad),
        )
    inputs, labels = [], []
    for r in rows:
        sequence = torch.tensor([*r.source, *r.target])
        row_labels = sequence[1:].clone()
        row_labels[: len(r.source) - 1 + r.skip] = IGNORE
        inputs.append(sequence[:-1])
        labels.append(row_labels)
    width = max(len(row) for row in inputs)
    prefix = trained.objective.reads_prefix  # prefix, ul2-mixture, span; causal ones (clm, mtp, fim) do not
    return Batch(
        input_ids=pad_rows(inputs, width, special.pad),
        labels=pad_rows(labels, width, IGNORE),
        attention="prefix" if prefix else "causal",
        prefix_len=torch.tensor([len(r.source) for r in rows]) if prefix else None,
    )


def _loglikelihoods(trained: Trained, rows: list[Framed], batch_size: int, device, bar: WorkBar) -> list[float]:
    """Sum of log-probabilities of each row's scored target tokens."""
    found: list[float] = []
    for begin in range(0, len(rows), batch_size):
        group = rows[begin : begin + batch_size]
        out = trained.model(choice_batch(trained, group).to(device))
        sums = torch.zeros(len(group), dtype=torch.float64, device=out.token_loss.device)
        sums.index_add_(0, out.token_rows, out.token_loss.double())
        found.extend((-sums).tolist())
        bar.advance(len(group))
    return found


def _pseudo_loglikelihoods(
    trained: Trained, questions: list[ChoiceQuestion], batch_size: int, device, bar: WorkBar, choice_pll: str
) -> list[float]:
    """Each choice's pseudo-log-likelihood (module docstring), the masked copies of every choice batched together;
    `bar` counts the copies' tokens."""
    if choice_pll == "whole":
        texts = [q.context.rstrip() + DELIMITER + c if q.context.strip() else c for q in questions for c in q.choices]
        rows, starts = [framed_ids(trained, text) for text in texts], None
    else:
        framed = [
            framed_continuation(trained, *split_tokens(trained, q.context, c)) for q in questions for c in q.choices
        ]
        rows, starts = [ids for ids, _ in framed], [start for _, start in framed]
    bar.start(copy_tokens(trained, rows, starts))
    return text_plls(trained, rows, batch_size, device, bar, scored_from=starts)


def choice_scores(
    trained: Trained,
    questions: list[ChoiceQuestion],
    batch_size: int,
    device,
    bar: WorkBar,
    choice_pll: str = CHOICE_PLL[0],
) -> list[list[float]]:
    """The model's score of every choice of every question (higher = more likely); `bar` counts choices, or for
    encoders and objectives scoring by their own way the tokens of their masked copies. `choice_pll`: how an
    encoder scores (CHOICE_PLL)."""
    scorer = own_scorer(trained)
    if scorer is not None:
        rows, starts = whole_rows(trained, questions)
        bar.start(scorer.work(rows))
        flat = scorer.scores(trained.model, rows, starts, batch_size, bar.advance)
    elif reading_of(trained) is Reading.PSEUDO_LIKELIHOOD:
        flat = _pseudo_loglikelihoods(trained, questions, batch_size, device, bar, choice_pll)
    else:
        bar.start(sum(len(q.choices) for q in questions))
        flat = _loglikelihoods(trained, framed_choices(trained, questions), batch_size, device, bar)
    scores, it = [], iter(flat)
    for q in questions:
        scores.append([next(it) for _ in q.choices])
    return scores


def _strictly_best(values: list[float], label: int) -> bool:
    """The answer scores above every other choice: a tie is wrong, whichever choice comes first (the BabyLM
    pipeline's rule for ties; the first-choice-wins argmax counted a tie right whenever the answer was choice 0)."""
    return all(values[label] > v for i, v in enumerate(values) if i != label)


def choice_outcomes(questions: list[ChoiceQuestion], scores: list[list[float]]) -> tuple[list[bool], list[bool]]:
    """Per question, whether the highest score is the answer, and whether the highest score per UTF-8 byte is."""
    right, right_norm = [], []
    for q, s in zip(questions, scores, strict=True):
        right.append(_strictly_best(s, q.label))
        per_byte = [v / max(len(c.encode("utf-8")), 1) for v, c in zip(s, q.choices, strict=True)]
        right_norm.append(_strictly_best(per_byte, q.label))
    return right, right_norm


def choice_figures(questions: list[ChoiceQuestion], scores: list[list[float]]) -> dict:
    """accuracy, accuracy_norm (per UTF-8 byte of the choice), chance and n."""
    right, right_norm = choice_outcomes(questions, scores)
    n = len(questions)
    return {
        ACCURACY: sum(right) / n,
        ACCURACY_NORM: sum(right_norm) / n,
        CHANCE: sum(1 / len(q.choices) for q in questions) / n,
        "n": n,
    }


def choice_evidence(questions: list[ChoiceQuestion], scores: list[list[float]]) -> dict:
    """What pairs this run with another on the same questions (lmpt.downstream.significance): each accuracy's 95%
    bootstrap interval and per-question outcomes, and the questions' digest."""
    right, right_norm = choice_outcomes(questions, scores)
    texts = ("\x1f".join([q.context, *q.choices, str(q.label)]) for q in questions)
    return {
        **figure_outcomes(ACCURACY, right),
        **figure_outcomes(ACCURACY_NORM, right_norm),
        ITEMS_DIGEST: items_digest(texts),
    }


def method_of(trained: Trained, choice_pll: str = CHOICE_PLL[0]) -> str:
    """How the run's choices are scored, in words."""
    scorer = own_scorer(trained)
    if scorer is not None:
        return f"{scorer.method} of each choice given the context (its tokens masked, the context never)"
    reading = reading_of(trained)
    if reading is Reading.PSEUDO_LIKELIHOOD and choice_pll == "whole":
        return "pseudo-log-likelihood of each filled text (context + choice)"
    if reading is Reading.PSEUDO_LIKELIHOOD:
        return "conditional pseudo-log-likelihood of each choice given the context"
    if reading is Reading.ENCODER_DECODER:
        return "decoder log-likelihood of each choice given the context as encoder input"
    return "log-likelihood of each choice after the context" + (
        " (context as bidirectional prefix)" if trained.objective.reads_prefix else ""
    )


def evaluate_choices(
    trained: Trained,
    questions: list[ChoiceQuestion],
    batch_size: int,
    hidden: bool,
    task: str = "",
    choice_pll: str = CHOICE_PLL[0],
) -> dict:
    """The figures of a multiple-choice task, with the method, under a progress bar naming `task` unless `hidden`;
    `choice_pll`: how an encoder scores a choice (CHOICE_PLL)."""
    device = trained.model.head_weight.device
    counts_tokens = reading_of(trained) in (Reading.PSEUDO_LIKELIHOOD, Reading.OWN)
    unit = "tokens" if counts_tokens else "choices"  # what choice_scores counts
    with torch.inference_mode(), WorkBar(f"{task} zero-shot".lstrip(), hidden=hidden, unit=unit) as bar:
        scores = choice_scores(trained, questions, batch_size, device, bar, choice_pll)
    return {
        "arch": trained.arch,
        "objective": trained.objective_name,
        "method": method_of(trained, choice_pll),
        **choice_figures(questions, scores),
        **choice_evidence(questions, scores),
    }


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


def pair_method(trained: Trained, within_word: bool) -> str:
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
        "method": pair_method(trained, within_word),
        **pair_figures(pairs, good, bad, good_tokens, bad_tokens),
    }
