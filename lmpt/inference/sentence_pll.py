"""Pseudo-log-likelihood of many short texts at once (zero-shot minimal pairs, an encoder's multiple-choice choices):
each text's masked copies (lmpt.inference.pll.masked_copies, one per scored ordinary token) are pooled across texts,
so one forward pass holds `batch_size` copies of many texts, texts of similar length side by side (little padding;
padded keys are masked, so a copy scores the same in any batch). A text may be scored from a position on
(`scored_from`): the conditional PLL of a choice masks only the choice's tokens, its context read whole in every
copy. `within_word` is Kauf & Ivanova's (2023, "A Better Way to Do Masked Language Model Scoring") PLL-word-l2r:
scoring a token also masks the tokens to its right in the same word, so a word's later pieces cannot give its
earlier ones away (a word starts at a piece the tokenizer's `word_starts` marks)."""

from __future__ import annotations

from collections.abc import Iterator

import torch

from lmpt.batch import IGNORE, Batch
from lmpt.inference.pll import masked_copies
from lmpt.inference.progress import WorkBar
from lmpt.objectives.sequences import pad_rows
from lmpt.rundir.trained import Trained


def framed_ids(trained: Trained, text: str) -> list[int]:
    """The ids an encoder run scores for `text`: in the objective's text frame (nsp: [CLS] text [SEP]), the text
    cut from the left where the whole would not fit the model (as multiple_choice does)."""
    before, after = trained.objective.text_frame(trained.tokenizer.special)
    body = trained.model.max_seq_len - len(before) - len(after)
    return [*before, *trained.tokenizer.encode(text)[-body:], *after]


def framed_continuation(trained: Trained, context: list[int], continuation: list[int]) -> tuple[list[int], int]:
    """(ids, scored_from): context + continuation in the objective's text frame, cut from the left where the whole
    would not fit the model (as `framed_ids`), and the position the continuation starts at: its conditional PLL
    scores only from there on, the context read in every copy and never masked."""
    before, after = trained.objective.text_frame(trained.tokenizer.special)
    body = trained.model.max_seq_len - len(before) - len(after)
    ids = [*context, *continuation][-body:]
    return [*before, *ids, *after], len(before) + max(0, len(ids) - len(continuation))


def pll_copies(
    row: torch.Tensor, first_ordinary: int, mask_id: int, word_starts: torch.Tensor | None = None, scored_from: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs, labels) [P, len(row)]: one copy per ordinary token of `row` from position `scored_from` on (reserved
    ids are never scored, the tokens before `scored_from` never masked), that token masked and labelled; with
    `word_starts` ([vocab] bool) the copy also masks the later pieces of its word."""
    positions = torch.nonzero(row >= first_ordinary).flatten()
    positions = positions[positions >= scored_from]
    inputs, labels = masked_copies(row, positions, mask_id)
    if word_starts is not None:
        word = torch.cumsum(word_starts[row].long(), 0)  # word index of each position
        later = torch.arange(row.numel())[None, :] > positions[:, None]
        inputs[later & (word[None, :] == word[positions][:, None])] = mask_id
    return inputs, labels


def _copies_in_batches(
    trained: Trained, rows: list[list[int]], batch_size: int, word_starts: torch.Tensor | None, scored_from: list[int]
) -> Iterator[tuple[list[torch.Tensor], list[torch.Tensor], list[int]]]:
    """(inputs, labels, text index) of `batch_size` copies at a time, texts taken shortest first."""
    special = trained.tokenizer.special
    inputs: list[torch.Tensor] = []
    labels: list[torch.Tensor] = []
    owners: list[int] = []
    for index in sorted(range(len(rows)), key=lambda i: len(rows[i])):
        copy_inputs, copy_labels = pll_copies(
            torch.tensor(rows[index]), special.first_ordinary, special.mask, word_starts, scored_from[index]
        )
        for row_inputs, row_labels in zip(copy_inputs, copy_labels, strict=True):
            inputs.append(row_inputs)
            labels.append(row_labels)
            owners.append(index)
            if len(inputs) == batch_size:
                yield inputs, labels, owners
                inputs, labels, owners = [], [], []
    if inputs:
        yield inputs, labels, owners


def copy_tokens(trained: Trained, rows: list[list[int]], scored_from: list[int] | None = None) -> int:
    """Tokens of the masked copies the texts make (one copy per scored ordinary token, each as long as its text): the
    work `text_plls` does, in units of equal cost. Counting copies instead, the bar would run fast through the short
    texts scored first and slow through the long ones, its time left growing as it went."""
    first = trained.tokenizer.special.first_ordinary
    starts = scored_from or [0] * len(rows)
    return sum(sum(1 for t in row[start:] if t >= first) * len(row) for row, start in zip(rows, starts, strict=True))


def text_plls(
    trained: Trained,
    rows: list[list[int]],
    batch_size: int,
    device,
    bar: WorkBar,
    within_word: bool = False,
    scored_from: list[int] | None = None,
) -> list[float]:
    """The pseudo-log-likelihood (nats, <= 0) of each framed text (`framed_ids`), `batch_size` masked copies per
    forward pass; `scored_from[i]`: the first position of text i scored (None: every ordinary token of every text).
    `bar` advances by the copies' tokens (`copy_tokens`). A text with no scored token scores 0."""
    special = trained.tokenizer.special
    word_starts = trained.tokenizer.word_starts() if within_word else None
    segments = trained.objective.n_segments > 0
    totals = torch.zeros(len(rows), dtype=torch.float64)
    starts = scored_from or [0] * len(rows)
    for inputs, labels, owners in _copies_in_batches(trained, rows, batch_size, word_starts, starts):
        width = max(row.numel() for row in inputs)
        input_ids = pad_rows(inputs, width, special.pad)
        batch = Batch(
            input_ids=input_ids,
            labels=pad_rows(labels, width, IGNORE),
            attention="bidirectional",
            segment_ids=torch.zeros_like(input_ids) if segments else None,
        )
        out = trained.model(batch.to(device))
        owner = torch.tensor(owners)[out.token_rows.cpu()]
        totals.index_add_(0, owner, -out.token_loss.double().cpu())
        bar.advance(sum(row.numel() for row in inputs))
    return totals.tolist()
