"""nsp: BERT's next sentence prediction (or ALBERT's sentence-order prediction), trained jointly with mlm."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np
import torch
import torch.nn.functional as F

from lmpt.batch import Batch
from lmpt.data.sampler import Windows
from lmpt.errors import LmptError
from lmpt.model.output import ModelOutput
from lmpt.objectives.base import Objective, Stats
from lmpt.objectives.checks import require_at_least, require_fraction
from lmpt.objectives.masking import mask_tokens
from lmpt.objectives.measure import FixedRateMaskedLoss, Measure
from lmpt.objectives.mlm import BertMasking, check_masking
from lmpt.objectives.sequences import pad_rows
from lmpt.tokenizer.base import Tokenizer
from lmpt.tokenizer.special import SpecialTokens

if TYPE_CHECKING:
    from lmpt.data.corpus import TokenCorpus


def _randint(high: int, gen: torch.Generator) -> int:
    """Uniform integer in [0, high)."""
    return int(torch.randint(high, (1,), generator=gen))


def sentence_bounds(corpus: TokenCorpus, doc: int) -> np.ndarray:
    """Absolute [start, ..., end] offsets of document `doc`'s non-empty sentences (end excludes its eos)."""
    start, end = corpus.doc_span(doc)
    starts = np.asarray(corpus.sentence_starts(doc), dtype=np.int64)
    starts = np.unique(np.concatenate([[start], starts[(starts > start) & (starts < end)]]))
    return np.concatenate([starts, [end]])


def read(corpus: TokenCorpus, start: int, end: int) -> torch.Tensor:
    """Corpus tokens [start, end) as int64."""
    if end <= start:
        return torch.zeros(0, dtype=torch.long)
    return torch.from_numpy(np.asarray(corpus.window(int(start), int(end - start)), dtype=np.int64))


def pair_document(corpus: TokenCorpus, doc: int) -> int:
    """`doc`, or if it holds fewer than two tokens (too few for two non-empty segments) the next document
    that holds two, wrapping round; check_corpus makes sure there is one."""
    for k in range(corpus.n_docs):
        candidate = (doc + k) % corpus.n_docs
        start, end = corpus.doc_span(candidate)
        if end - start >= 2:
            return candidate
    raise ValueError("no document holds two tokens")


def chunk_end(bounds: np.ndarray, first: int, budget: int) -> int:
    """Index (into `bounds`) where a chunk of whole sentences from sentence `first` reaches `budget` tokens
    or the document ends."""
    for j in range(first + 1, len(bounds)):
        if bounds[j] - bounds[first] >= budget:
            return j
    return len(bounds) - 1


def truncate_pair(
    a: torch.Tensor, b: torch.Tensor, budget: int, gen: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's rule: while too long, trim one token from the longer side (B on a tie), from its front or
    back at random."""
    la, lb = a.numel(), b.numel()
    trim_a = trim_b = 0
    while la + lb > budget:
        if la > lb:
            la, trim_a = la - 1, trim_a + 1
        else:
            lb, trim_b = lb - 1, trim_b + 1
    front_a = int((torch.rand(trim_a, generator=gen) < 0.5).sum())
    front_b = int((torch.rand(trim_b, generator=gen) < 0.5).sum())
    return a[front_a : front_a + la], b[front_b : front_b + lb]


PAIR_LABELS = {"nsp": ("is-next", "random"), "sop": ("in-order", "swapped")}
"""lmpt-preview: the names of pair labels 0 and 1 per objective.variant."""


@dataclass
class NspConfig(BertMasking):
    name: str = "nsp"
    variant: str = "nsp"
    """nsp: B is the next segment or one from another document; sop: B follows A or the two are swapped."""
    random_pair_prob: float = 0.5
    """Probability that a pair is negative (random document for nsp, swapped order for sop)."""
    short_seq_prob: float = 0.1
    """Probability that a pair is cut to a random shorter length, uniform on [2, seq_len - 3] (BERT; 0: never)."""
    mlm_weight: float = 1.0
    """Weight of the masked-LM loss trained jointly with the pair loss (0 trains the pair head only)."""


class NextSentencePrediction(Objective):
    """Pairs `[CLS] A [SEP] B [SEP]` with a two-way label on [CLS], plus mlm on the pair's tokens."""

    name: ClassVar[str] = "nsp"
    config_class: ClassVar[type] = NspConfig
    cfg: NspConfig
    natural_arch: ClassVar[str] = "encoder"
    supported_archs: ClassVar[tuple[str, ...]] = ("encoder",)
    measure_class: ClassVar[type[Measure]] = FixedRateMaskedLoss
    perplexity_of: ClassVar[str] = "mlm_loss"
    n_segments: ClassVar[int] = 2
    n_sequence_classes: ClassVar[int] = 2

    listing_order: ClassVar[int] = 2
    reference_order: ClassVar[int] = 2
    loss_family: ClassVar[str | None] = "masked"
    export_refusal: ClassVar[str] = (
        "its segment embeddings and next-sentence head have no place in EuroBertForMaskedLM (the exact match for "
        "lmpt's mlm encoder: rotary positions, RMSNorm, SwiGLU, no biases), and BERT/ModernBERT differ in norms, "
        "activations and positions"
    )

    @classmethod
    def text_frame(cls, special: SpecialTokens) -> tuple[list[int], list[int]]:
        """Trained on [CLS] A [SEP] B [SEP]: one text is read as [CLS] text [SEP], one segment."""
        return [special.cls], [special.sep]

    def preview_legend(self) -> list[tuple[str, str]]:
        return [*super().preview_legend(), ("segment B", "segment_b"), ("[CLS] [SEP]", "special")]

    def pair_labels(self) -> tuple[str, str]:
        return PAIR_LABELS.get(str(getattr(self.cfg, "variant", "nsp")), PAIR_LABELS["nsp"])

    def __init__(self, cfg: NspConfig, tokenizer: Tokenizer, seq_len: int, arch: str) -> None:
        super().__init__(cfg, tokenizer, seq_len, arch)
        check_masking(cfg)
        if cfg.variant not in ("nsp", "sop"):
            raise LmptError(f"objective.variant={cfg.variant} is unknown: use nsp or sop")
        self.random_pair_prob = require_fraction(cfg.random_pair_prob, "objective.random_pair_prob")
        self.short_seq_prob = require_fraction(cfg.short_seq_prob, "objective.short_seq_prob")
        self.mlm_weight = require_at_least(cfg.mlm_weight, "objective.mlm_weight", 0.0)
        if seq_len < 5:
            raise LmptError(f"data.seq_len={seq_len} is too short for nsp ([CLS] A [SEP] B [SEP]): use at least 5")
        self.word_starts = tokenizer.word_starts() if cfg.whole_word else None
        self.budget = seq_len - 3

    @property
    def expected_loss_fraction(self) -> float:
        return float(self.cfg.mask_prob)

    @property
    def window_length(self) -> int:
        return self.seq_len  # only the start is used: it picks the document and the first sentence

    def describe_attention(self) -> str:
        return "bidirectional: every position sees every position (segment 0 = [CLS] A [SEP], 1 = B [SEP])"

    def check_corpus(self, corpus: TokenCorpus, text: str) -> None:
        variant = self.cfg.variant
        if variant == "nsp" and corpus.n_docs < 2:
            raise LmptError(
                f"nsp needs at least two documents; {text} has {corpus.n_docs}: split it into documents "
                "(use data.documents=blank_line or data.documents=line, or give several files) or use "
                "objective.variant=sop, which needs only one"
            )
        if not (np.diff(np.asarray(corpus.doc_offsets)) > 2).any():  # a document's tokens and its eos
            raise LmptError(
                f"{variant} cuts both segments of a pair from one document, but no document of {text} holds two "
                "tokens: give it longer documents (data.documents=blank_line or data.documents=file joins lines)"
            )

    def pair_length(self, gen: torch.Generator) -> int:
        """Tokens A and B may hold together: the whole window, or with probability short_seq_prob a length
        uniform on [2, window] (BERT's short sequences)."""
        short = bool(torch.rand(1, generator=gen) < self.short_seq_prob)
        return 2 + _randint(self.budget - 1, gen) if short else self.budget

    def make_pair(
        self, corpus: TokenCorpus, offset: int, gen: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor, int]:
        """(A, B, label), both segments non-empty, from the document holding corpus `offset` (starting at the
        sentence holding it) or, if that document is a single token, from the next one that is longer."""
        here = corpus.doc_of(offset)
        doc = pair_document(corpus, here)
        bounds = sentence_bounds(corpus, doc)
        n_sent = len(bounds) - 1
        first = int(np.searchsorted(bounds, offset, side="right")) - 1 if doc == here else 0
        first = max(0, min(first, n_sent - 2))
        negative = bool(torch.rand(1, generator=gen) < self.random_pair_prob)
        budget = self.pair_length(gen)
        end = chunk_end(bounds, first, budget)
        if end - first >= 2:
            split = int(bounds[first + 1 + _randint(end - first - 1, gen)])
        else:  # one sentence (of two tokens or more): split it between tokens
            split = int(bounds[first]) + 1 + _randint(int(bounds[end] - bounds[first]) - 1, gen)
        a = read(corpus, bounds[first], split)
        if self.cfg.variant == "sop":
            b = read(corpus, split, bounds[end])
            a, b = truncate_pair(a, b, budget, gen)
            return (b, a, 1) if negative else (a, b, 0)
        if negative:
            other = (doc + 1 + _randint(corpus.n_docs - 1, gen)) % corpus.n_docs
            other_bounds = sentence_bounds(corpus, other)
            start = _randint(len(other_bounds) - 1, gen)
            b_end = chunk_end(other_bounds, start, budget - a.numel())
            b = read(corpus, other_bounds[start], other_bounds[b_end])
        else:
            b = read(corpus, split, bounds[end])
        a, b = truncate_pair(a, b, budget, gen)
        return a, b, int(negative)

    def make_batch(self, windows: Windows, gen: torch.Generator) -> Batch:
        sp = self.special
        cls, sep = torch.tensor([sp.cls]), torch.tensor([sp.sep])
        rows, segments, labels = [], [], []
        for offset in windows.starts.tolist():
            a, b, label = self.make_pair(windows.corpus, offset, gen)
            rows.append(torch.cat([cls, a, sep, b, sep]))
            segments.append(torch.cat([torch.zeros(a.numel() + 2, dtype=torch.long), torch.ones(b.numel() + 1)]))
            labels.append(label)
        tokens = pad_rows(rows, self.seq_len, sp.pad)
        inputs, mlm_labels = mask_tokens(
            tokens,
            gen,
            special=sp,
            vocab_size=self.vocab_size,
            mask_prob=float(self.cfg.mask_prob),
            mask_token_frac=float(self.cfg.mask_token_frac),
            random_token_frac=float(self.cfg.random_token_frac),
            word_starts=self.word_starts,
        )
        return Batch(
            input_ids=inputs,
            labels=mlm_labels,
            attention="bidirectional",
            segment_ids=pad_rows([s.long() for s in segments], self.seq_len, 0),
            sequence_labels=torch.tensor(labels, dtype=torch.long),
        )

    def loss(self, out: ModelOutput, batch: Batch) -> tuple[torch.Tensor, Stats]:
        """mlm_weight * mean masked-token loss + mean pair cross-entropy."""
        token_loss = out.token_loss
        n = torch.tensor(token_loss.numel(), device=token_loss.device)
        mlm_loss = token_loss.sum() / n.clamp(min=1)
        logits = out.sequence_logits
        assert logits is not None and batch.sequence_labels is not None, "nsp's model and batches carry both"
        targets = batch.sequence_labels.to(logits.device)
        pair_sum = F.cross_entropy(logits.float(), targets, reduction="sum")
        n_pairs = torch.tensor(targets.numel(), device=logits.device)
        total = self.mlm_weight * mlm_loss + pair_sum / n_pairs
        stats: Stats = {
            "loss": (total.detach(), torch.ones((), device=logits.device)),
            "mlm_loss": (token_loss.sum().detach(), n),
            "acc": (out.token_correct.sum(), n),
            "nsp_loss": (pair_sum.detach(), n_pairs),
            "nsp_acc": ((logits.argmax(-1) == targets).sum(), n_pairs),
        }
        return total, stats
