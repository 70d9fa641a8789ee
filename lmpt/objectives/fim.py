"""fim: fill-in-the-middle after Bavarian et al. 2022 ("Efficient Training of Language Models to Fill in the
Middle", arXiv 2207.14255), document-level FIM.

Each document in a window is, with probability `fim_rate`, cut at two split points into prefix, middle and
suffix and rearranged, in PSM order `<PRE> prefix <SUF> suffix <MID> middle` or, with probability `spm_rate`,
in the paper's SPM variant (its appendix; the one StarCoder and Megatron's FIM use) `<PRE> <SUF> suffix <MID>
prefix middle`; the document's eos still follows. The rest of the documents stay plain clm; loss is on every
token, sentinels included, as in the paper.

Where lmpt differs: the split points are two character (UTF-8 byte) positions drawn uniformly on [0, length] as
the paper does, each moved back to the token boundary at or before it (a split inside a piece keeps that piece
whole in the part after it). The paper splits the text and re-tokenises the three parts; lmpt's token cache
holds ids, and re-encoding would not give the document back (the default tokenizer normalises text and drops a
part's leading space), so the parts are the document's own tokens and putting them back rebuilds it exactly.
A window cuts its first and last documents: the piece inside the window is what is rearranged, and the three
sentinels each rearranged document adds push the window's last tokens out (it stays data.seq_len + 1 long)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

import torch

from lmpt.batch import IGNORE, Batch
from lmpt.data.sampler import Windows
from lmpt.errors import LmptError
from lmpt.objectives.base import Objective
from lmpt.objectives.clm import CausalLM, ClmConfig
from lmpt.objectives.measure import FimLikelihood, Measure
from lmpt.tokenizer.base import Tokenizer
from lmpt.tokenizer.special import SpecialTokens, sentinel_piece


def fim_sentinels(special: SpecialTokens) -> tuple[int, int, int]:
    """(<fim_prefix>, <fim_suffix>, <fim_middle>) ids of a tokenizer, or a refusal when it has no room for them."""
    sentinels = special.fim_sentinels()
    if sentinels is None:
        raise LmptError(
            f"objective=fim needs 3 reserved sentinel tokens (<fim_prefix>, <fim_suffix>, <fim_middle>: a pretrained "
            f"tokenizer's own, else the last three span sentinels) and the tokenizer has room for "
            f"{special.num_sentinels}: set "
            "tokenizer.num_sentinels=3 or more (a tokenizer file with its own <extra_id_N> pieces needs 3 of them)"
        )
    return sentinels


def rearrange(document: list[int], low: int, high: int, spm: bool, sentinels: tuple[int, int, int]) -> list[int]:
    """`document` split before tokens `low` <= `high` into prefix, middle and suffix, in PSM or SPM order."""
    pre, suf, mid = sentinels
    prefix, middle, suffix = document[:low], document[low:high], document[high:]
    if spm:
        return [pre, suf, *suffix, mid, *prefix, *middle]
    return [pre, *prefix, suf, *suffix, mid, *middle]


def split_documents(row: list[int], eos: int) -> list[tuple[list[int], bool]]:
    """The documents of a window row: (tokens without the eos, whether an eos ended it inside the row)."""
    documents: list[tuple[list[int], bool]] = []
    current: list[int] = []
    for token in row:
        if token == eos:
            documents.append((current, True))
            current = []
        else:
            current.append(token)
    if current:
        documents.append((current, False))
    return documents


@dataclass
class FimConfig(ClmConfig):
    name: str = "fim"
    fim_rate: float = 0.5
    """Share of documents rearranged for fill-in-the-middle (Bavarian et al. 2022); the rest stay plain clm."""
    spm_rate: float = 0.5
    """Share of the rearranged documents in suffix-prefix-middle order (the rest prefix-suffix-middle)."""


class FillInTheMiddle(CausalLM):
    """clm on windows whose documents are partly rearranged prefix-suffix-middle (decoder only)."""

    name: ClassVar[str] = "fim"
    config_class: ClassVar[type] = FimConfig
    cfg: FimConfig
    measure_class: ClassVar[type[Measure]] = FimLikelihood

    listing_order: ClassVar[int] = 8
    reference_order: ClassVar[int] = 8
    loss_family: ClassVar[str | None] = None
    preview_targets_caption: ClassVar[str] = ""
    fills_middle: ClassVar[bool] = True

    def preview_legend(self) -> list[tuple[str, str]]:
        return Objective.preview_legend(self)

    def preview_settings(self) -> list[str]:
        return [
            "rearranged documents: <fim_prefix> prefix <fim_suffix> suffix <fim_middle> middle (PSM) or "
            "<fim_prefix> <fim_suffix> suffix <fim_middle> prefix middle (SPM)"
        ]

    def __init__(self, cfg: FimConfig, tokenizer: Tokenizer, seq_len: int, arch: str) -> None:
        super().__init__(cfg, tokenizer, seq_len, arch)
        for key in ("fim_rate", "spm_rate"):
            if not 0.0 <= float(getattr(cfg, key)) <= 1.0:
                raise LmptError(f"objective.{key}={getattr(cfg, key)} must be in [0, 1] (a probability)")
        self.fim_rate, self.spm_rate = float(cfg.fim_rate), float(cfg.spm_rate)
        self.sentinels = fim_sentinels(self.special)
        self._piece_bytes: torch.Tensor | None = None

    def describe_attention(self) -> str:
        numbers = [self.special.sentinel_number(i) for i in self.sentinels]
        if None in numbers:  # a pretrained tokenizer's own <fim_prefix> ... tokens
            return f"{super().describe_attention()}; its own <fim_prefix>, <fim_suffix>, <fim_middle> as sentinels"
        pre, suf, mid = (sentinel_piece(n) for n in numbers if n is not None)
        return f"{super().describe_attention()}; sentinels <fim_prefix> {pre}, <fim_suffix> {suf}, <fim_middle> {mid}"

    def split_points(self, document: list[int], gen: torch.Generator) -> tuple[int, int]:
        """Two character positions uniform on [0, length], sorted, each moved back to a token boundary."""
        if self._piece_bytes is None:
            self._piece_bytes = self.tokenizer.piece_bytes()
        ends = torch.cumsum(self._piece_bytes[torch.tensor(document)], 0)
        characters = torch.randint(0, int(ends[-1]) + 1, (2,), generator=gen).sort().values
        low, high = torch.searchsorted(ends, characters, right=True).tolist()
        return low, high

    def rearrange_row(
        self, row: list[int], gen: torch.Generator, probe: bool | None = None
    ) -> tuple[list[int], list[bool]]:
        """One window row with each of its documents rearranged with probability fim_rate (in SPM order with
        probability spm_rate), cut to its length; with `probe` (False: PSM, True: SPM) every document is rearranged in
        that order. Also which positions hold a middle's tokens or the eos ending one (the FIM loss's targets)."""
        pad, eos = self.special.pad, self.special.eos
        used = len(row)
        while used and row[used - 1] == pad:
            used -= 1
        out: list[int] = []
        middle: list[bool] = []
        for document, ended in split_documents(row[:used], eos):
            if probe is None:
                fim, spm = (torch.rand(2, generator=gen) < torch.tensor([self.fim_rate, self.spm_rate])).tolist()
            else:
                fim, spm = True, probe
            in_middle = [False] * len(document)
            if fim and document:
                low, high = self.split_points(document, gen)
                document = rearrange(document, low, high, spm, self.sentinels)
                in_middle = [False] * (len(document) - (high - low)) + [True] * (high - low)
            out += [*document, eos] if ended else document
            middle += [*in_middle, any(in_middle)] if ended else in_middle
        return (out + row[used:])[: len(row)], (middle + [False] * (len(row) - used))[: len(row)]

    def make_batch(self, windows: Windows, gen: torch.Generator) -> Batch:
        rows = [self.rearrange_row(row, gen)[0] for row in windows.tokens.tolist()]
        tokens = torch.tensor(rows, dtype=windows.tokens.dtype)
        return super().make_batch(replace(windows, tokens=tokens), gen)

    def probe_batch(self, windows: Windows, gen: torch.Generator, spm: bool) -> Batch:
        """The FIM loss's batch (Bavarian et al. 2022): every document of the windows rearranged in PSM (or, with
        `spm`, SPM) order at split points drawn from `gen`, the loss on each middle's tokens and the eos ending it."""
        rows, middles = zip(*(self.rearrange_row(row, gen, probe=spm) for row in windows.tokens.tolist()), strict=True)
        batch = super().make_batch(replace(windows, tokens=torch.tensor(rows, dtype=windows.tokens.dtype)), gen)
        batch.labels[~torch.tensor(middles)[:, 1:]] = IGNORE
        return batch
