"""Pseudo-log-likelihood of many short texts at once (zero-shot minimal pairs): each text's masked copies
(lmpt.inference.pll.masked_copies, one per ordinary token) are pooled across texts, so one forward pass holds
`batch_size` copies of many texts, texts of similar length side by side (little padding; padded keys are masked, so
a copy scores the same in any batch). `within_word` is Kauf & Ivanova's (2023, "A Better Way to Do Masked Language
Model Scoring") PLL-word-l2r: scoring a token also masks the tokens to its right in the same word, so a word's
later pieces cannot give its earlier ones away (a word starts at a piece the tokenizer's `word_starts` marks)."""

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


def pll_copies(
    row: torch.Tensor, first_ordinary: int, mask_id: int, word_starts: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs, labels) [P, len(row)]: one copy per ordinary token of `row` (reserved ids are never scored), that
    token masked and labelled; with `word_starts` ([vocab] bool) the copy also masks the later pieces of its word."""
    positions = torch.nonzero(row >= first_ordinary).flatten()
    inputs, labels = masked_copies(row, positions, mask_id)
    if word_starts is not None:
        word = torch.cumsum(word_starts[row].long(), 0)  # word index of each position
        later = torch.arange(row.numel())[None, :] > positions[:, None]
        inputs[later & (word[None, :] == word[positions][:, None])] = mask_id
    return inputs, labels


def _copies_in_batches(
    trained: Trained, rows: list[list[int]], batch_size: int, word_starts: torch.Tensor | None
) -> Iterator[tuple[list[torch.Tensor], list[torch.Tensor], list[int]]]:
    """(inputs, labels, text index) of `batch_size` copies at a time, texts taken shortest first."""
    special = trained.tokenizer.special
    inputs: list[torch.Tensor] = []
    labels: list[torch.Tensor] = []
    owners: list[int] = []
    for index in sorted(range(len(rows)), key=lambda i: len(rows[i])):
        copy_inputs, copy_labels = pll_copies(torch.tensor(rows[index]), special.first_ordinary, special.mask,
                                              word_starts)  # fmt: skip
        for row_inputs, row_labels in zip(copy_inputs, copy_labels, strict=True):
            inputs.append(row_inputs)
            labels.append(row_labels)
            owners.append(index)
            if len(inputs) == batch_size:
                yield inputs, labels, owners
                inputs, labels, owners = [], [], []
    if inputs:
        yield inputs, labels, owners


def copy_tokens(trained: Trained, rows: list[list[int]]) -> int:
    """Tokens of the masked copies the texts make (one copy per ordinary token, each as long as its text): the work
    `text_plls` does, in units of equal cost. Counting copies instead, the bar would run fast through the short texts
    scored first and slow through the long ones, its time left growing as it went."""
    first = trained.tokenizer.special.first_ordinary
    return sum(sum(1 for t in row if t >= first) * len(row) for row in rows)


def text_plls(
    trained: Trained, rows: list[list[int]], batch_size: int, device, bar: WorkBar, within_word: bool = False
) -> list[float]:
    """The pseudo-log-likelihood (nats, <= 0) of each framed text (`framed_ids`), `batch_size` masked copies per
    forward pass; `bar` advances by the copies' tokens (`copy_tokens`). A text with no ordinary token scores 0."""
    special = trained.tokenizer.special
    word_starts = trained.tokenizer.word_starts() if within_word else None
    segments = trained.objective.n_segments > 0
    totals = torch.zeros(len(rows), dtype=torch.float64)
    for inputs, labels, owners in _copies_in_batches(trained, rows, batch_size, word_starts):
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
