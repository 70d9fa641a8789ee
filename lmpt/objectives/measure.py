"""How an objective's held-out text is measured (principle 13): one Measure per way, each objective naming its own
(`Objective.measure`). Training's validation, lmpt-eval and the reports ask the measure; none of them switches on
the architecture or on a likelihood string.

A measure says
- which held-out batch the run's `val_loss` is of (`held_out_batch`: by default the objective's own `make_batch`;
  fim's is the plain text, so its yardstick is of the windows clm reads, not of its rearranged training text);
- the fixed batches of its yardstick, identical in every run (`yardstick_batches`), and the figures they give
  (`figures`): bits per token for a likelihood (exact, or a diffusion bound with its standard error), the masked
  loss at one shared rate for masked objectives, fim's loss on rearranged text beside its left-to-right likelihood;
- how lmpt-eval scores any text with the run's model (`score_text`), and what that score is, in words.

The measures:
| measure | objectives | val_bits_per_token | lmpt-eval RUN data=FILE |
| --- | --- | --- | --- |
| NextTokenLikelihood | clm, mtp (its main head) | exact | sliding windows, left to right |
| FimLikelihood | fim | exact, on the plain text | sliding windows; training adds val_fim_{psm,spm}_loss |
| CausalReading | prefix | none | sliding windows, causal |
| CausalFixedRate | gpt-bert | none (val_fixed_loss) | sliding windows, causal |
| FixedRateMaskedLoss | mlm, nsp, electra, clm-then-mlm | none (val_fixed_loss) | seeded masking at the run's rate |
| CorruptionLoss | span, ul2-mixture | none | the run's own corruption, seeded |
| DiffusionBound | mdlm | a bound, with its standard error | the bound over fixed draws, with its standard error |
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import torch

from lmpt.batch import IGNORE, Batch, note_padding
from lmpt.data.sampler import Windows
from lmpt.errors import LmptError
from lmpt.objectives.masking import mask_tokens
from lmpt.objectives.sequences import pad_rows
from lmpt.objectives.yardstick import (
    BITS_PER_TOKEN,
    bound_bits_per_token,
    draw_groups,
    eval_mask_prob,
    exact_bits_per_token,
    perplexity,
    yardstick_generator,
)
from lmpt.rng import generator

if TYPE_CHECKING:
    from lmpt.data.sampler import ValidationWindows
    from lmpt.model.language_model import LanguageModel
    from lmpt.model.output import ModelOutput
    from lmpt.tokenizer.base import Tokenizer
    from lmpt.tokenizer.special import SpecialTokens

StatsOf = Callable[[list[Batch]], dict[str, float]]
"""The means of an objective's stats over some held-out batches (the evaluator's, summed over the ranks)."""


class Measured(Protocol):
    """What a measure asks of the objective it measures (lmpt.objectives.base.Objective meets it)."""

    name: ClassVar[str]
    perplexity_of: ClassVar[str]
    n_segments: ClassVar[int]
    cfg: Any
    tokenizer: Tokenizer
    special: SpecialTokens

    @property
    def window_length(self) -> int: ...

    @property
    def yardstick_draws(self) -> int: ...

    def make_batch(self, windows: Windows, gen: torch.Generator) -> Batch: ...

    def yardstick_batch(self, windows: Windows, gen: torch.Generator) -> Batch: ...

    def loss(
        self, out: ModelOutput, batch: Batch
    ) -> tuple[torch.Tensor, dict[str, tuple[torch.Tensor, torch.Tensor]]]: ...

    def inference_predictor(self, model: LanguageModel) -> LanguageModel: ...

    def with_settings(self, settings: dict[str, Any]) -> Measured: ...

    @classmethod
    def text_frame(cls, special: SpecialTokens) -> tuple[list[int], list[int]]: ...


class Rearranging(Measured, Protocol):
    """An objective that rearranges its training text (fim): the plain form its yardstick reads, and its probes."""

    def plain_batch(self, windows: Windows) -> Batch: ...

    def probe_batch(self, windows: Windows, gen: torch.Generator, spm: bool) -> Batch: ...


class Progress(Protocol):
    """A progress bar's two calls (lmpt.inference.progress.WorkBar)."""

    def start(self, total: int) -> None: ...

    def advance(self, n: int) -> None: ...


@dataclass
class TextOptions:
    """How lmpt-eval reads a text: window length, stride (sliding windows), batch size and seed of any draws."""

    seq_len: int
    stride: int
    batch_size: int
    seed: int
    device: torch.device


@dataclass
class TextScore:
    """What scoring a text gives: nats over `tokens` scored tokens, `correct` of them predicted, `bytes` they spell
    (0 when the measure scores every byte of the text), in `windows` windows; `stderr_bits` the standard error of a
    bound's bits per token (0 for a deterministic score)."""

    nats: float = 0.0
    tokens: int = 0
    correct: int = 0
    bytes: int = 0
    windows: int = 0
    stderr_bits: float = 0.0
    accuracy: float | None = None
    """The share of predictions that were right, where it is not correct / tokens (a bound: of the masked tokens)."""


def concat_batches(batches: list[Batch]) -> Batch:
    """One batch of equally shaped single batches (tensors concatenated along the batch dimension)."""
    merged: dict[str, Any] = {}
    for f in fields(Batch):
        value = getattr(batches[0], f.name)
        merged[f.name] = torch.cat([getattr(b, f.name) for b in batches]) if isinstance(value, torch.Tensor) else value
    return Batch(**merged)


class Measure:
    """The default: the objective's own loss on its own held-out batches, no yardstick. Subclasses say more."""

    likelihood: ClassVar[str | None] = None
    """"exact" (the negative log-likelihood of the held-out text), "bound" (an upper bound on it) or None: whether
    its yardstick stands on the bits-per-token axis that ranks likelihood models together, and as what."""
    bound: ClassVar[bool] = False
    """The yardstick is an upper bound on the negative log-likelihood (estimated), not the exact figure."""
    every_evaluation: ClassVar[bool] = True
    """The yardstick is taken at every evaluation; False: at the last alone (a bound's costs many validations)."""
    pseudo_likelihood: ClassVar[bool] = False
    """lmpt-eval method=pll applies (an encoder that reads every token with only itself masked)."""
    kind: ClassVar[str] = "its own loss"
    """What the measure is, in a few words (refusals and documents name it)."""

    def __init__(self, objective: Measured) -> None:
        self.objective = objective

    # -- training's validation ------------------------------------------------------------------------------------
    def held_out_batch(self, windows: Windows, gen: torch.Generator) -> Batch:
        """The held-out batch `val_loss` is of: the objective's training form."""
        return self.objective.make_batch(windows, gen)

    def yardstick_batches(self, sets: dict[str, ValidationWindows], n_batches: int) -> list[Batch]:
        """The fixed batches of the yardstick (draws keyed by source and batch index only: the same in every run)."""
        return []

    def figures(self, val: dict[str, float], stats_of: StatsOf, fixed: list[Batch]) -> dict[str, float]:
        """The yardstick's figures from the validation means `val` and the fixed batches (empty: not this time)."""
        return {}

    def held_out_nats(self, record: dict[str, float]) -> float | None:
        """Nats per scored held-out token that val_bpb converts to bits per byte (None: none this evaluation)."""
        return record.get(f"val_{self.objective.perplexity_of}")

    # -- lmpt-eval ------------------------------------------------------------------------------------------------
    def describe(self, o: TextOptions) -> str:
        """What `score_text` measures, in words (lmpt-eval's `method`)."""
        return f"{self.objective.name}'s own loss on consecutive windows (seed {o.seed}), seq_len {o.seq_len}"

    def score_text(self, model: LanguageModel, tokens: list[int], o: TextOptions, progress: Progress) -> TextScore:
        """The model's score of a text (documents' ids, each followed by eos): by default the objective's own batches
        on consecutive raw windows, each drawn from its own seeded generator; a tail shorter than a window is left."""
        objective = self.objective
        width = objective.window_length
        stream = torch.tensor(tokens)
        n_windows = stream.numel() // width
        if n_windows == 0:
            raise LmptError(
                f"the text has {stream.numel()} tokens, fewer than one window of {width} (seq_len={o.seq_len}): "
                "give more text"
            )
        progress.start(n_windows)

        def batches() -> Iterator[Batch]:
            for k in range(n_windows):
                window = Windows(stream[k * width : (k + 1) * width][None], torch.tensor([k * width]), None)  # type: ignore[arg-type]
                yield objective.make_batch(window, generator(o.seed, "eval", k))

        return self.token_losses(model, batches(), o, progress, count_bytes=True)

    def token_losses(
        self, model: LanguageModel, batches: Iterable[Batch], o: TextOptions, progress: Progress, count_bytes: bool
    ) -> TextScore:
        """The summed token loss of single-window `batches`; with `count_bytes` the bytes of the scored targets too."""
        sizes = self.objective.tokenizer.piece_bytes() if count_bytes else None
        return sum_token_losses(model, batches, o.batch_size, sizes, o.device, progress)


def sum_token_losses(
    model: LanguageModel,
    batches: Iterable[Batch],
    batch_size: int,
    sizes: torch.Tensor | None,
    device: torch.device,
    progress: Progress,
) -> TextScore:
    """Single-window `batches` through the model `batch_size` at a time: their summed token loss, tokens, right
    predictions and windows; `sizes` [V] (piece bytes) also counts the bytes of the scored targets."""
    score, pending = TextScore(), list[Batch]()

    def run() -> None:
        batch = concat_batches(pending).to(device)
        out = model(batch)
        score.nats += float(out.token_loss.double().sum())
        score.tokens += out.token_loss.numel()
        score.correct += int(out.token_correct.sum())
        score.windows += len(pending)
        if sizes is not None:
            score.bytes += int(sizes[batch.labels[batch.labels != IGNORE].cpu()].sum())
        progress.advance(len(pending))
        pending.clear()

    for batch in batches:
        pending.append(batch)
        if len(pending) == batch_size:
            run()
    if pending:
        run()
    return score


def framed_rows(tokens: list[int], seq_len: int, before: list[int], after: list[int]) -> list[torch.Tensor]:
    """Consecutive windows of `tokens` (the last may be shorter), each between `before` and `after` (an objective's
    text frame: nsp's [CLS] ... [SEP]) to fill seq_len; one LmptError line when the frame leaves no room."""
    body = seq_len - len(before) - len(after)
    if body < 1:
        raise LmptError(f"seq_len={seq_len} is too short")
    stream, head, tail = (torch.tensor(ids, dtype=torch.long) for ids in (tokens, before, after))
    return [torch.cat([head, stream[start : start + body], tail]) for start in range(0, stream.numel(), body)]


def decoder_windows(n_tokens: int, seq_len: int, stride: int) -> list[tuple[int, int, int]]:
    """(begin, end, first_target) over a stream of `n_tokens` whose token 0 is context only: the window's inputs are
    tokens [begin, end-1), its targets [begin+1, end), and it scores targets from first_target on. Every token
    1..n-1 is scored exactly once."""
    windows = []
    first = 1
    while first < n_tokens:
        end = min(n_tokens, first + (seq_len if first == 1 else stride))
        windows.append((max(0, end - 1 - seq_len), end, first))
        first = end
    return windows


class CausalReading(Measure):
    """A decoder's text read left to right: lmpt-eval scores every token once by sliding windows of seq_len tokens
    that advance by `stride`, each scoring only its last `stride` tokens (the first window all of its own), the
    first token after an eos (as every training document starts)."""

    kind: ClassVar[str] = "its causal loss, left to right"

    def describe(self, o: TextOptions) -> str:
        return f"sliding window: seq_len {o.seq_len}, stride {o.stride}"

    def score_text(self, model: LanguageModel, tokens: list[int], o: TextOptions, progress: Progress) -> TextScore:
        special = self.objective.special
        stream = torch.tensor([special.eos, *tokens])
        windows = decoder_windows(stream.numel(), o.seq_len, o.stride)
        progress.start(len(windows))

        def batches() -> Iterator[Batch]:
            for begin, end, first in windows:
                labels = stream[begin + 1 : end].clone()
                labels[: first - begin - 1] = IGNORE
                yield Batch(
                    input_ids=pad_rows([stream[begin : end - 1]], o.seq_len, special.pad),
                    labels=pad_rows([labels], o.seq_len, IGNORE),
                )

        return self.token_losses(model, batches(), o, progress, count_bytes=False)


class NextTokenLikelihood(CausalReading):
    """The exact negative log-likelihood of the held-out windows, next token by next token (clm; mtp's main head,
    whose `loss` stat is the main head's alone): val_bits_per_token = val_loss / ln 2."""

    kind: ClassVar[str] = "the exact likelihood, left to right"

    likelihood: ClassVar[str | None] = "exact"

    def held_out_batch(self, windows: Windows, gen: torch.Generator) -> Batch:
        """The objective's batch without training's input corruption (clm's input_mask_prob): held-out text is read
        clean, so a regularised clm is measured on the text plain clm is."""
        return self._clean.make_batch(windows, gen)

    @functools.cached_property
    def _clean(self) -> Measured:
        if not getattr(self.objective.cfg, "input_mask_prob", 0.0):
            return self.objective
        return self.objective.with_settings({"input_mask_prob": 0.0})

    def figures(self, val: dict[str, float], stats_of: StatsOf, fixed: list[Batch]) -> dict[str, float]:
        return exact_bits_per_token(val["loss"])


class FimLikelihood(NextTokenLikelihood):
    """fim's yardstick: the left-to-right likelihood of the plain held-out windows, the same windows and tokens clm
    scores (with the same weights, the same number), and beside it the paper's FIM loss (Bavarian et al. 2022): the
    same windows with every document rearranged, once in PSM and once in SPM order, split at the same points in every
    run (draws keyed by source and batch index), the loss on each middle's tokens (and the eos ending it): what a
    model must predict from both sides. val_fim_loss is the mean of the two orders."""

    kind: ClassVar[str] = "the exact likelihood of the plain text, left to right"
    objective: Rearranging

    def held_out_batch(self, windows: Windows, gen: torch.Generator) -> Batch:
        return self.objective.plain_batch(windows)

    def yardstick_batches(self, sets: dict[str, ValidationWindows], n_batches: int) -> list[Batch]:
        pad = self.objective.special.pad
        return [
            note_padding(self.objective.probe_batch(windows.batch(i), yardstick_generator(name, i), spm), pad)
            for spm in (False, True)
            for name, windows in sets.items()
            for i in range(n_batches)
        ]

    def figures(self, val: dict[str, float], stats_of: StatsOf, fixed: list[Batch]) -> dict[str, float]:
        result = super().figures(val, stats_of, fixed)
        if fixed:
            psm, spm = (stats_of(group)["loss"] for group in draw_groups(fixed, 2))
            result |= {"val_fim_psm_loss": psm, "val_fim_spm_loss": spm, "val_fim_loss": (psm + spm) / 2}
        return result


class FixedRateMaskedLoss(Measure):
    """Masked objectives: the yardstick masks eval_mask_prob of the held-out tokens, every one by [MASK], with draws
    keyed by batch index alone (lmpt.objectives.yardstick): val_fixed_loss, _acc, _ppl, shared by every run whatever
    its own mask_prob. lmpt-eval masks consecutive windows at the run's own settings (or method=pll)."""

    kind: ClassVar[str] = "a masked-token loss"

    pseudo_likelihood: ClassVar[bool] = True

    def yardstick_batches(self, sets: dict[str, ValidationWindows], n_batches: int) -> list[Batch]:
        rate = eval_mask_prob(self.objective.cfg)
        if rate is None:
            return []
        # the objective at its eval_mask_prob with every selected token replaced by [MASK], token by token
        settings = {"mask_prob": rate, "mask_token_frac": 1.0, "random_token_frac": 0.0, "whole_word": False}
        fixed = self.objective.with_settings(settings)
        pad = self.objective.special.pad
        return [
            note_padding(fixed.make_batch(windows.batch(i), yardstick_generator(name, i)), pad)
            for name, windows in sets.items()
            for i in range(n_batches)
        ]

    def figures(self, val: dict[str, float], stats_of: StatsOf, fixed: list[Batch]) -> dict[str, float]:
        if not fixed:
            return {}
        means = stats_of(fixed)
        loss = means[self.objective.perplexity_of]
        return {"val_fixed_loss": loss, "val_fixed_acc": means["acc"], "val_fixed_ppl": perplexity(loss)}

    def describe(self, o: TextOptions) -> str:
        cfg = self.objective.cfg
        return f"masked tokens (mask_prob {float(cfg.mask_prob):g}, seed {o.seed}), seq_len {o.seq_len}"

    def score_text(self, model: LanguageModel, tokens: list[int], o: TextOptions, progress: Progress) -> TextScore:
        """Masked-LM loss on consecutive windows (the last may be shorter), each masked by its own seeded draw at the
        run's mask_prob / mask_token_frac / random_token_frac / whole_word; nsp runs see each window as [CLS] window
        [SEP], one segment, and only the masked-token loss is scored (not the pair head)."""
        objective, cfg = self.objective, self.objective.cfg
        tok, special = objective.tokenizer, objective.special
        rows = framed_rows(tokens, o.seq_len, *objective.text_frame(special))
        word_starts = tok.word_starts() if cfg.get("whole_word", False) else None
        progress.start(len(rows))

        def batches() -> Iterator[Batch]:
            for k, row in enumerate(rows):
                inputs, labels = mask_tokens(
                    row[None],
                    generator(o.seed, "eval", k),
                    special=special,
                    vocab_size=tok.vocab_size,
                    mask_prob=float(cfg.mask_prob),
                    mask_token_frac=float(cfg.mask_token_frac),
                    random_token_frac=float(cfg.random_token_frac),
                    word_starts=word_starts,
                )
                yield Batch(
                    input_ids=pad_rows([inputs[0]], o.seq_len, special.pad),
                    labels=pad_rows([labels[0]], o.seq_len, IGNORE),
                    attention="bidirectional",
                    segment_ids=torch.zeros(1, o.seq_len, dtype=torch.long) if objective.n_segments else None,
                )

        return self.token_losses(model, batches(), o, progress, count_bytes=True)


class CausalFixedRate(CausalReading, FixedRateMaskedLoss):
    """A decoder trained on masked next-token prediction beside clm (gpt-bert): its yardstick is the masked loss at
    the shared rate (FixedRateMaskedLoss), and lmpt-eval reads a text left to right (CausalReading)."""

    pseudo_likelihood: ClassVar[bool] = False
    kind: ClassVar[str] = "a masked-token loss; a text read left to right"


class CorruptionLoss(Measure):
    """Span corruption (span, ul2-mixture): the run's own corruption at its training settings, seeded; the loss is of
    its targets, comparable only between runs at the same settings."""

    kind: ClassVar[str] = "its span-corruption loss"

    def describe(self, o: TextOptions) -> str:
        return f"{self.objective.name} corruption at training settings (seed {o.seed}), seq_len {o.seq_len}"


class DiffusionBound(Measure):
    """The masked diffusion bound (mdlm): an upper bound on the held-out text's negative log-likelihood, estimated
    over `yardstick_draws` fixed passes of masks whose spread gives its standard error; on the bits-per-token axis
    beside clm's exact figure. lmpt-eval estimates the same bound on any text: consecutive windows of seq_len tokens,
    objective.eval_draws passes of fixed masks (seeded by `seed`, window and pass), the bound's mean and standard
    error in bits per token, every token of the text counted."""

    kind: ClassVar[str] = "the diffusion bound"

    likelihood: ClassVar[str | None] = "bound"
    bound: ClassVar[bool] = True
    every_evaluation: ClassVar[bool] = False

    def yardstick_batches(self, sets: dict[str, ValidationWindows], n_batches: int) -> list[Batch]:
        pad = self.objective.special.pad
        return [  # draw 0's batches first, then draw 1's, ...
            note_padding(self.objective.yardstick_batch(windows.batch(i), yardstick_generator(name, i, draw)), pad)
            for draw in range(self.objective.yardstick_draws)
            for name, windows in sets.items()
            for i in range(n_batches)
        ]

    def figures(self, val: dict[str, float], stats_of: StatsOf, fixed: list[Batch]) -> dict[str, float]:
        if not fixed:
            return {}
        passes = draw_groups(fixed, self.objective.yardstick_draws)
        return bound_bits_per_token([stats_of(group)["loss"] for group in passes])

    def held_out_nats(self, record: dict[str, float]) -> float | None:
        """val_bpb is of the bound (its bits per token at the yardstick's evaluation), never of one sampled draw."""
        bits = record.get(BITS_PER_TOKEN)
        return None if bits is None else bits * math.log(2)

    def describe(self, o: TextOptions) -> str:
        draws = self.objective.yardstick_draws
        return f"diffusion bound over {draws} fixed draws of masks (seed {o.seed}), seq_len {o.seq_len}"

    def score_text(self, model: LanguageModel, tokens: list[int], o: TextOptions, progress: Progress) -> TextScore:
        objective = self.objective
        special = objective.special
        predictor = objective.inference_predictor(model)
        rows = [tokens[start : start + o.seq_len] for start in range(0, len(tokens), o.seq_len)]
        groups = [rows[first : first + DRAW_GROUP] for first in range(0, len(rows), DRAW_GROUP)]
        draws = objective.yardstick_draws
        progress.start(len(rows) * draws)
        pass_nats, masked, correct = [], 0, 0
        for draw in range(draws):
            nats = 0.0
            for g, group in enumerate(groups):
                # the window form make_batch reads: a leading token it drops, then the row it scores
                window = pad_rows([torch.tensor([special.eos, *row]) for row in group], o.seq_len + 1, special.pad)
                batch = objective.yardstick_batch(
                    Windows(window, torch.zeros(len(group), dtype=torch.long), None),  # type: ignore[arg-type]
                    generator(o.seed, "eval", g, draw),
                ).to(o.device)
                _, stats = objective.loss(predictor(batch), batch)
                nats += float(stats["loss"][0].double())
                correct, masked = correct + int(stats["acc"][0]), masked + int(stats["acc"][1])
                progress.advance(len(group))
            pass_nats.append(nats / len(tokens))
        figures = bound_bits_per_token(pass_nats)
        return TextScore(
            nats=figures[BITS_PER_TOKEN] * math.log(2) * len(tokens),
            tokens=len(tokens),
            windows=len(rows),
            stderr_bits=figures[f"{BITS_PER_TOKEN}_stderr"],
            accuracy=correct / max(1, masked),
        )


DRAW_GROUP = 16
"""Rows whose bound lmpt-eval draws together (stratified across them, as a validation batch of 16 is): fixed, so the
draws are the same whatever batch_size says."""
