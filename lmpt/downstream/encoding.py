"""Examples as model inputs, laid out per architecture, and batches of them (right-padded to the longest row):

- encoder: `[CLS] text [SEP]` (`pair [SEP]`); segment ids 0 through the first [SEP] and 1 after, when the model
  has segment embeddings (nsp runs);
- decoder: `</s> text` (`[SEP] pair`) `</s>`: a document start as training saw it (documents are packed behind
  an eos), causal attention;
- encoder-decoder: encoder `text` (`[SEP] pair`) `</s>` (span corruption's inputs end with eos), decoder `<s>`.

Texts longer than `seq_len` are cut at the end, the longer of a pair first, so the markers always fit. A labelled task
read and checked (lmpt.downstream.labelled) is tokenised for one model, its labels as its target reads them, by
`encode_task`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from lmpt.batch import IGNORE, Batch
from lmpt.objectives.sequences import pad_rows
from lmpt.rundir.trained import Trained
from lmpt.tokenizer.base import Tokenizer

if TYPE_CHECKING:
    from lmpt.downstream.labelled import LabelledTask
    from lmpt.downstream.labelled_files import Example
    from lmpt.downstream.target import Target


@dataclass
class EncodedSplit:
    """A split tokenised: one id row (and segment row, when used) per example, and the label of each (a class id,
    or a number to predict)."""

    rows: list[torch.Tensor]
    segments: list[torch.Tensor] | None
    labels: torch.Tensor

    def __len__(self) -> int:
        return len(self.rows)

    def subset(self, indices: list[int]) -> EncodedSplit:
        """The examples at `indices`, in that order (the same row tensors, not copies)."""
        segments = None if self.segments is None else [self.segments[i] for i in indices]
        return EncodedSplit([self.rows[i] for i in indices], segments, self.labels[indices])


def fit_pair(text: list[int], pair: list[int] | None, room: int) -> tuple[list[int], list[int] | None]:
    """Cut the longer of the two (the text alone, without a pair) one token at a time until both fit `room`."""
    text, pair = list(text), None if pair is None else list(pair)
    while len(text) + (len(pair) if pair is not None else 0) > room:
        if pair is not None and len(pair) > len(text):
            pair.pop()
        else:
            text.pop()
    return text, pair


def encode_split(
    examples: list[Example],
    labels: dict[str, int] | torch.Tensor,
    tokenizer: Tokenizer,
    arch: str,
    seq_len: int,
    segments: bool,
) -> EncodedSplit:
    """The examples laid out for `arch` (see the module's table), at most `seq_len` tokens each, with their labels:
    a class id each by `labels` (label as written -> id), or `labels` itself (one a row, as the task's target reads
    them: a regression's numbers)."""
    if isinstance(labels, dict):
        labels = torch.tensor([labels[e.label] for e in examples])
    sp = tokenizer.special
    texts = tokenizer.encode_batch([e.text for e in examples])
    pairs = tokenizer.encode_batch([e.pair or "" for e in examples]) if examples[0].pair is not None else None
    markers = {"encoder": 2, "decoder": 2, "encoder-decoder": 1}[arch] + (pairs is not None)
    rows, segment_rows = [], []
    for i, ids in enumerate(texts):
        text, pair = fit_pair(ids, pairs[i] if pairs is not None else None, seq_len - markers)
        tail = [] if pair is None else [sp.sep, *pair]
        if arch == "encoder":
            first = [sp.cls, *text, sp.sep]
            second = [] if pair is None else [*pair, sp.sep]
            row = first + second
            segment_rows.append(torch.tensor([0] * len(first) + [1] * len(second)))
        elif arch == "decoder":
            row = [sp.eos, *text, *tail, sp.eos]
        else:
            row = [*text, *tail, sp.eos]
        rows.append(torch.tensor(row))
    return EncodedSplit(rows, segment_rows if segments and arch == "encoder" else None, labels)


def collate(split: EncodedSplit, indices: list[int], arch: str, special) -> Batch:
    """The examples at `indices` as one Batch, right-padded with pad to the longest row."""
    rows = [split.rows[i] for i in indices]
    length = max(r.numel() for r in rows)
    ids = pad_rows(rows, length, special.pad)
    segment_ids = None if split.segments is None else pad_rows([split.segments[i] for i in indices], length, 0)
    decoder_ids = torch.full((len(rows), 1), special.bos) if arch == "encoder-decoder" else None
    attention = "causal" if arch == "decoder" else "bidirectional"
    no_labels = torch.full((len(rows), 1), IGNORE)  # the classifier reads hidden states, never the LM head
    return Batch(ids, no_labels, attention, decoder_input_ids=decoder_ids, segment_ids=segment_ids)


@dataclass
class EncodedTask:
    """A task read, checked and tokenised: its classes (label as written, in class-id order; none for numbers to
    predict), splits and target."""

    name: str
    classes: list[str]
    train: EncodedSplit
    dev: EncodedSplit
    test: EncodedSplit | None
    examples: dict[str, list[Example]]
    """The examples as read, by split ("train", "dev", "test"): what the bag-of-words floor reads."""
    target: Target
    """What the task predicts: the head, loss, figures and floor (lmpt.downstream.target)."""
    unlabelled: EncodedSplit | None = None
    """Examples only predicted, never scored (a benchmark's test split whose labels are withheld)."""


def encode_task(
    trained: Trained,
    labelled: LabelledTask,
    seq_len: int,
    target: Target,
) -> EncodedTask:
    """`labelled` tokenised for the model, at most `seq_len` tokens an example, its labels as `target` reads them,
    and its unlabelled examples, to predict only (their labels are never read)."""
    unlabelled = labelled.unlabelled_examples()
    segments = trained.model.body.embed.segments is not None

    def encode(examples: list[Example], labels: torch.Tensor) -> EncodedSplit:
        return encode_split(examples, labels, trained.tokenizer, trained.arch, seq_len, segments)

    def labelled_split(split: str) -> EncodedSplit:
        examples = labelled.examples[split]
        return encode(examples, target.labels(examples, labelled.classes))

    test = labelled_split("test") if "test" in labelled.examples else None
    unlabelled_split = encode(unlabelled, torch.zeros(len(unlabelled))) if unlabelled else None
    return EncodedTask(
        labelled.name,
        labelled.classes,
        labelled_split("train"),
        labelled_split("dev"),
        test,
        labelled.examples,
        target,
        unlabelled_split,
    )
