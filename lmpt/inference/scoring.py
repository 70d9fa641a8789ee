"""How lmpt-eval scores a text, per architecture. Decoders: every token of the text is scored once by sliding
windows of `seq_len` tokens that advance by `stride`, each scoring only its last `stride` tokens (the first window
scores all of its own), so every token has at least seq_len - stride tokens of left context where the text allows.
Encoders: a fixed, seeded masking at the run's objective settings. Encoder-decoders: the run's own corruption
(span or ul2-mixture), seeded."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, fields

import torch

from lmpt.batch import IGNORE, Batch
from lmpt.config.command_options import require
from lmpt.data.windows import Windows
from lmpt.inference.progress import WorkBar
from lmpt.objectives.mlm import mask_tokens
from lmpt.objectives.registry import build_objective
from lmpt.objectives.sequences import pad_rows
from lmpt.rng import generator
from lmpt.rundir.trained import Trained
from lmpt.tokenizer.base import piece_bytes


@dataclass
class Text:
    tokens: list[int]
    """Every document's sentences' ids, each document followed by eos (the training stream)."""
    bytes: int
    """UTF-8 bytes of the sentences as handed to the tokenizer (whitespace between them not counted)."""
    documents: int


@dataclass
class Score:
    nats: float
    tokens: int
    correct: int
    bytes: int
    windows: int


def concat_batches(batches: list[Batch]) -> Batch:
    """One batch of equally shaped single batches (tensors concatenated along the batch dimension)."""
    first = batches[0]
    merged = {}
    for f in fields(Batch):
        value = getattr(first, f.name)
        if isinstance(value, torch.Tensor):
            merged[f.name] = torch.cat([getattr(b, f.name) for b in batches])
        else:
            merged[f.name] = value
    return Batch(**merged)


def _run(trained: Trained, batches: list[Batch], sizes: torch.Tensor | None, score: Score, device) -> None:
    """Add the loss of `batches` (one forward pass) to `score`; `sizes` [V] counts target bytes when given."""
    batch = concat_batches(batches).to(device)
    out = trained.model(batch)
    score.nats += float(out.token_loss.double().sum())
    score.tokens += out.token_loss.numel()
    score.correct += int(out.token_correct.sum())
    score.windows += len(batches)
    if sizes is not None:
        targets = batch.labels[batch.labels != IGNORE].cpu()
        score.bytes += int(sizes[targets].sum())


def score_in_batches(
    trained: Trained,
    batches: Iterable[Batch],
    batch_size: int,
    sizes: torch.Tensor | None,
    score: Score,
    device,
    bar: WorkBar,
) -> Score:
    """Run single-example batches through the model `batch_size` at a time, adding each group to `score`; `bar`
    advances by the windows scored."""
    pending: list[Batch] = []
    for batch in batches:
        pending.append(batch)
        if len(pending) == batch_size:
            _run(trained, pending, sizes, score, device)
            bar.advance(len(pending))
            pending = []
    if pending:
        _run(trained, pending, sizes, score, device)
        bar.advance(len(pending))
    return score


def decoder_windows(n_tokens: int, seq_len: int, stride: int) -> list[tuple[int, int, int]]:
    """(begin, end, first_target) over a stream of `n_tokens` whose token 0 is context only: the window's
    inputs are tokens [begin, end-1), its targets [begin+1, end), and it scores targets from first_target on.
    Every token 1..n-1 is scored exactly once."""
    windows = []
    first = 1
    while first < n_tokens:
        end = min(n_tokens, first + (seq_len if first == 1 else stride))
        windows.append((max(0, end - 1 - seq_len), end, first))
        first = end
    return windows


def score_decoder(
    trained: Trained, text: Text, seq_len: int, stride: int, batch_size: int, device, bar: WorkBar
) -> Score:
    """Causal loss of every token of the text, the first after an eos (as every training document is)."""
    special = trained.tokenizer.special
    stream = torch.tensor([special.eos, *text.tokens])
    score = Score(0.0, 0, 0, text.bytes, 0)

    windows = decoder_windows(stream.numel(), seq_len, stride)
    bar.start(len(windows))

    def batches() -> Iterator[Batch]:
        for begin, end, first in windows:
            labels = stream[begin + 1 : end].clone()
            labels[: first - begin - 1] = IGNORE
            yield Batch(
                input_ids=pad_rows([stream[begin : end - 1]], seq_len, special.pad),
                labels=pad_rows([labels], seq_len, IGNORE),
            )

    return score_in_batches(trained, batches(), batch_size, None, score, device, bar)


def score_encoder(
    trained: Trained, text: Text, seq_len: int, batch_size: int, seed: int, device, bar: WorkBar
) -> Score:
    """Masked-LM loss on consecutive windows (the last may be shorter), each masked by its own seeded draw at
    the run's mask_prob / mask_token_frac / random_token_frac / whole_word. nsp runs see each window as
    [CLS] window [SEP], one segment; only the masked-token loss is scored (not the pair head)."""
    tok, cfg = trained.tokenizer, trained.config.objective
    special = tok.special
    before, after = trained.objective.text_frame(special)
    body = seq_len - len(before) - len(after)
    require(body >= 1, f"seq_len={seq_len} is too short")
    stream = torch.tensor(text.tokens)
    sizes = piece_bytes(tok)
    word_starts = tok.word_starts() if cfg.get("whole_word", False) else None
    score = Score(0.0, 0, 0, 0, 0)
    bar.start(-(-stream.numel() // body))

    def batches() -> Iterator[Batch]:
        for k, start in enumerate(range(0, stream.numel(), body)):
            row = stream[start : start + body]
            row = torch.cat([torch.tensor(before, dtype=torch.long), row, torch.tensor(after, dtype=torch.long)])
            inputs, labels = mask_tokens(
                row[None],
                generator(seed, "eval", k),
                special=special,
                vocab_size=tok.vocab_size,
                mask_prob=float(cfg.mask_prob),
                mask_token_frac=float(cfg.mask_token_frac),
                random_token_frac=float(cfg.random_token_frac),
                word_starts=word_starts,
            )
            yield Batch(
                input_ids=pad_rows([inputs[0]], seq_len, special.pad),
                labels=pad_rows([labels[0]], seq_len, IGNORE),
                attention="bidirectional",
                segment_ids=torch.zeros(1, seq_len, dtype=torch.long) if trained.objective.n_segments else None,
            )

    return score_in_batches(trained, batches(), batch_size, sizes, score, device, bar)


def score_encoder_decoder(
    trained: Trained, text: Text, seq_len: int, batch_size: int, seed: int, device, bar: WorkBar
) -> Score:
    """The run's objective (span or ul2-mixture) at its training settings on consecutive raw windows, each
    corrupted by its own seeded draw; a tail shorter than one window is not scored."""
    tok = trained.tokenizer
    objective = build_objective(trained.config.objective, tok, seq_len, trained.arch)
    require(
        objective.target_length <= trained.model.max_seq_len,
        f"seq_len={seq_len} makes targets of {objective.target_length} tokens, beyond the model's max_seq_len",
    )
    width = objective.window_length
    stream = torch.tensor(text.tokens)
    n_windows = stream.numel() // width
    require(
        n_windows > 0,
        f"the text has {stream.numel()} tokens, fewer than one window of {width} (seq_len={seq_len}): give more text",
    )
    sizes = piece_bytes(tok)
    score = Score(0.0, 0, 0, 0, 0)
    bar.start(n_windows)

    def batches() -> Iterator[Batch]:
        for k in range(n_windows):
            window = stream[k * width : (k + 1) * width][None]
            windows = Windows(tokens=window, starts=torch.tensor([k * width]), corpus=None)  # type: ignore[arg-type]
            yield objective.make_batch(windows, generator(seed, "eval", k))

    return score_in_batches(trained, batches(), batch_size, sizes, score, device, bar)
