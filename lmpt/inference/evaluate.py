"""`lmpt-eval RUN data=PATH`: loss, perplexity and bits per byte of a trained model on any text.

Decoders: every token of the text is scored once by sliding windows of `seq_len` tokens that advance by
`stride`, each scoring only its last `stride` tokens (the first window scores all of its own), so every
token has at least seq_len - stride tokens of left context where the text allows. Encoders: a fixed,
seeded masking at the run's objective settings. Encoder-decoders: the run's own corruption (span or
ul2-mixture), seeded. The text is read and tokenised as training reads it: documents split by
`documents`, each document's sentences encoded and followed by eos."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, fields
from pathlib import Path

import torch
from rich.table import Table

from lmpt.batch import IGNORE, Batch, Windows
from lmpt.console import console
from lmpt.data.sources import iter_documents, resolve_paths
from lmpt.errors import LmptError
from lmpt.inference.load import RUN_ARGUMENT, Trained, load_trained
from lmpt.inference.options import parse_command, require, run_command
from lmpt.objectives.mlm import mask_tokens
from lmpt.objectives.registry import build_objective
from lmpt.objectives.sequences import pad_rows
from lmpt.rng import generator
from lmpt.tokenizer.tokenizer import WORD_START, Tokenizer

PROG = "lmpt-eval"
SUMMARY = (
    "Loss (nats per scored token), perplexity = exp(loss) and bits per byte of a trained model on any text: "
    "decoders by sliding windows, encoders by a fixed seeded masking, encoder-decoders by the run's seeded "
    "span corruption."
)
POSITIONALS = [RUN_ARGUMENT]
_BYTE_PIECE = re.compile(r"<0x[0-9A-Fa-f]{2}>")


@dataclass
class EvalOptions:
    data: list[str]
    """Text to evaluate: files, directories, globs or bundled:NAME, comma-separated (like data.paths)."""
    seq_len: int | None = None
    """Window length in tokens; null = the run's data.seq_len."""
    stride: int | None = None
    """Decoders: tokens each window advances and scores; null = seq_len // 2 (1 = most context, slowest)."""
    batch_size: int = 8
    """Windows per forward pass."""
    seed: int = 0
    """Seed of the masking / span corruption of encoders and encoder-decoders."""
    documents: str | None = None
    """How the text splits into documents (auto, blank_line, wikitext, line, file); null = the run's setting."""
    text_field: str | None = None
    """Field holding the text in .jsonl records; null = the run's setting."""
    device: str = "cpu"
    """cpu, cuda or auto."""
    json: bool = False
    """Print one JSON object instead of a table."""


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


def read_text(patterns: list[str], documents: str, text_field: str, tokenizer: Tokenizer) -> Text:
    """The text of `patterns` as training would tokenise it."""
    files = resolve_paths(patterns, Path.cwd())
    ids: list[int] = []
    n_bytes = n_docs = 0
    for doc in iter_documents(files, documents, text_field):
        for sentence in tokenizer.encode_batch(doc):
            ids.extend(sentence)
        ids.append(tokenizer.special.eos)
        n_bytes += sum(len(s.encode("utf-8")) for s in doc)
        n_docs += 1
    if not ids:
        raise LmptError(f"data={','.join(patterns)} holds no text to evaluate")
    return Text(ids, n_bytes, n_docs)


def piece_bytes(tokenizer: Tokenizer) -> torch.Tensor:
    """[V] UTF-8 bytes each piece spells: a word-start mark counts as a space, a byte piece as one byte,
    reserved tokens (eos, sentinels, ...) as none."""
    sizes = []
    for i in range(tokenizer.vocab_size):
        piece = tokenizer.id_to_piece(i)
        if i < tokenizer.special.first_ordinary:
            sizes.append(0)
        elif _BYTE_PIECE.fullmatch(piece):
            sizes.append(1)
        else:
            sizes.append(len(piece.replace(WORD_START, " ").encode("utf-8")))
    return torch.tensor(sizes, dtype=torch.long)


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


def _score_in_batches(
    trained: Trained, batches: Iterable[Batch], batch_size: int, sizes: torch.Tensor | None, score: Score, device
) -> Score:
    """Run single-example batches through the model `batch_size` at a time, adding each group to `score`."""
    pending: list[Batch] = []
    for batch in batches:
        pending.append(batch)
        if len(pending) == batch_size:
            _run(trained, pending, sizes, score, device)
            pending = []
    if pending:
        _run(trained, pending, sizes, score, device)
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


def score_decoder(trained: Trained, text: Text, seq_len: int, stride: int, batch_size: int, device) -> Score:
    """Causal loss of every token of the text, the first after an eos (as every training document is)."""
    special = trained.tokenizer.special
    stream = torch.tensor([special.eos, *text.tokens])
    score = Score(0.0, 0, 0, text.bytes, 0)

    def batches() -> Iterator[Batch]:
        for begin, end, first in decoder_windows(stream.numel(), seq_len, stride):
            labels = stream[begin + 1 : end].clone()
            labels[: first - begin - 1] = IGNORE
            yield Batch(
                input_ids=pad_rows([stream[begin : end - 1]], seq_len, special.pad),
                labels=pad_rows([labels], seq_len, IGNORE),
            )

    return _score_in_batches(trained, batches(), batch_size, None, score, device)


def score_encoder(trained: Trained, text: Text, seq_len: int, batch_size: int, seed: int, device) -> Score:
    """Masked-LM loss on consecutive windows (the last may be shorter), each masked by its own seeded draw at
    the run's mask_prob / mask_token_frac / random_token_frac / whole_word. nsp runs see each window as
    [CLS] window [SEP], one segment; only the masked-token loss is scored (not the pair head)."""
    tok, cfg = trained.tokenizer, trained.config.objective
    special = tok.special
    nsp = trained.objective_name == "nsp"
    body = seq_len - 2 if nsp else seq_len
    require(body >= 1, f"seq_len={seq_len} is too short")
    stream = torch.tensor(text.tokens)
    sizes = piece_bytes(tok)
    word_starts = tok.word_starts() if cfg.get("whole_word", False) else None
    score = Score(0.0, 0, 0, 0, 0)

    def batches() -> Iterator[Batch]:
        for k, start in enumerate(range(0, stream.numel(), body)):
            row = stream[start : start + body]
            if nsp:
                row = torch.cat([torch.tensor([special.cls]), row, torch.tensor([special.sep])])
            inputs, labels = mask_tokens(
                row[None], generator(seed, "eval", k), special=special, vocab_size=tok.vocab_size,
                mask_prob=float(cfg.mask_prob), mask_token_frac=float(cfg.mask_token_frac),
                random_token_frac=float(cfg.random_token_frac), word_starts=word_starts,
            )  # fmt: skip
            yield Batch(
                input_ids=pad_rows([inputs[0]], seq_len, special.pad),
                labels=pad_rows([labels[0]], seq_len, IGNORE),
                attention="bidirectional",
                segment_ids=torch.zeros(1, seq_len, dtype=torch.long) if nsp else None,
            )

    return _score_in_batches(trained, batches(), batch_size, sizes, score, device)


def score_encoder_decoder(trained: Trained, text: Text, seq_len: int, batch_size: int, seed: int, device) -> Score:
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

    def batches() -> Iterator[Batch]:
        for k in range(n_windows):
            window = stream[k * width : (k + 1) * width][None]
            windows = Windows(tokens=window, starts=torch.tensor([k * width]), corpus=None)  # type: ignore[arg-type]
            yield objective.make_batch(windows, generator(seed, "eval", k))

    return _score_in_batches(trained, batches(), batch_size, sizes, score, device)


def evaluate_text(trained: Trained, o: EvalOptions) -> dict:
    """The numbers lmpt-eval prints, as a dict."""
    cfg = trained.config
    seq_len = o.seq_len if o.seq_len is not None else int(cfg.data.seq_len)
    require(2 <= seq_len <= trained.model.max_seq_len, f"seq_len={seq_len} must be in [2, {trained.model.max_seq_len}]")
    stride = o.stride if o.stride is not None else max(1, seq_len // 2)
    require(1 <= stride <= seq_len, f"stride={stride} must be in [1, seq_len={seq_len}]")
    require(o.batch_size >= 1, f"batch_size={o.batch_size} must be at least 1")
    documents = o.documents or str(cfg.data.documents)
    text_field = o.text_field or str(cfg.data.text_field)
    text = read_text(o.data, documents, text_field, trained.tokenizer)
    device = trained.model.head_weight.device
    with torch.inference_mode():
        if trained.arch == "decoder":
            score = score_decoder(trained, text, seq_len, stride, o.batch_size, device)
            method = f"sliding window: seq_len {seq_len}, stride {stride}"
        elif trained.arch == "encoder":
            score = score_encoder(trained, text, seq_len, o.batch_size, o.seed, device)
            method = f"masked tokens (mask_prob {float(cfg.objective.mask_prob):g}, seed {o.seed}), seq_len {seq_len}"
        else:
            score = score_encoder_decoder(trained, text, seq_len, o.batch_size, o.seed, device)
            method = f"{trained.objective_name} corruption at training settings (seed {o.seed}), seq_len {seq_len}"
    loss = score.nats / max(score.tokens, 1)
    return {
        "arch": trained.arch,
        "objective": trained.objective_name,
        "method": method,
        "documents": text.documents,
        "text_tokens": len(text.tokens),
        "text_bytes": text.bytes,
        "scored_tokens": score.tokens,
        "scored_bytes": score.bytes,
        "windows": score.windows,
        "nats": score.nats,
        "loss": loss,
        "perplexity": math.exp(loss),
        "accuracy": score.correct / max(score.tokens, 1),
        "bits_per_byte": score.nats / math.log(2) / score.bytes if score.bytes else float("nan"),
    }


def render(result: dict) -> None:
    table = Table(title=f"lmpt-eval: {result['objective']} {result['arch']}", title_justify="left")
    table.add_column("metric")
    table.add_column("value", justify="right")
    rows = [
        ("method", result["method"]),
        (
            "documents / tokens / bytes",
            f"{result['documents']:,} / {result['text_tokens']:,} / {result['text_bytes']:,}",
        ),
        ("scored tokens / their bytes", f"{result['scored_tokens']:,} / {result['scored_bytes']:,}"),
        ("loss (nats/token)", f"{result['loss']:.4f}"),
        ("perplexity", f"{result['perplexity']:.2f}"),
        ("bits per byte", f"{result['bits_per_byte']:.4f}"),
        ("token accuracy", f"{result['accuracy']:.4f}"),
    ]
    for name, value in rows:
        table.add_row(name, value)
    console.print(table)


def evaluate(argv: list[str]) -> None:
    (run,), o = parse_command(argv, PROG, SUMMARY, POSITIONALS, EvalOptions)
    trained = load_trained(run, o.device)
    result = evaluate_text(trained, o)
    if o.json:
        print(json.dumps(result))
    else:
        render(result)


def main() -> None:
    run_command(evaluate)


if __name__ == "__main__":
    main()
