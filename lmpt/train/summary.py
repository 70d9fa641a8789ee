"""What a finished run prints: the summary table and a sample from the final model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.markup import escape

from lmpt.console import console
from lmpt.data.corpus import TokenCorpus
from lmpt.model.generate import sample
from lmpt.model.language_model import LanguageModel
from lmpt.rng import generator
from lmpt.tokenizer.base import Tokenizer
from lmpt.train.display import summary_table
from lmpt.train.loop import TrainLoop


def print_summary(loop: TrainLoop, run_path: Path, wall: float, model: Any) -> None:
    """The run summary table; `wall`: the run's wall time over every launch (lmpt.train.run.TrainResult.wall_s)."""
    records = [r for r in loop.metrics.records() if "loss" in r]
    first, last = (records[0], records[-1]) if records else ({}, {})
    val = loop.state.last_val
    rows = {
        "steps": str(loop.state.step),
        "parameters": f"{model.num_parameters() / 1e6:.2f}M",
        "train loss": f"{first.get('loss', float('nan')):.4f} -> {last.get('loss', float('nan')):.4f}",
        "val loss / ppl": f"{val.get('val_loss', float('nan')):.4f} / {val.get('val_ppl', float('nan')):.2f}",
        **(
            {"val loss at the fixed rate": f"{val['val_fixed_loss']:.4f} (objective.eval_mask_prob)"}
            if "val_fixed_loss" in val
            else {}
        ),
        **({"val bits per byte": f"{val['val_bpb']:.4f} (held-out windows)"} if "val_bpb" in val else {}),
        "tokens seen / loss-bearing": f"{loop.work.tokens:,} / {loop.work.loss_tokens:,}",
        "training FLOPs": f"{loop.work.flops:.3e}",
        "wall time / training": f"{wall:.1f}s / {loop.work.seconds:.1f}s",
        "run directory": str(run_path),
    }
    console.print(summary_table(rows))


PROMPT_END = "⟩"  # between the sample's prompt and what the model wrote


def print_sample(model: LanguageModel, tokenizer: Tokenizer, val_corpus: TokenCorpus, tokens: int, seed: int) -> None:
    """A continuation of the first held-out document's opening, ` ⟩ ` where the prompt ends (visible in plain text
    and logs too); each document it starts is a new line."""
    start, end = val_corpus.doc_span(0)
    prompt = [int(i) for i in val_corpus.window(start, min(8, end - start))]
    new = sample(model, prompt, tokens, generator=generator(seed, "sample"), vocab_size=tokenizer.vocab_size)
    ids = prompt + new
    documents: list[str] = []
    current: list[int] = []
    for token in ids:  # decode each document whole so pieces keep their leading spaces
        if token == tokenizer.special.eos:
            documents.append(tokenizer.decode(current))
            current = []
        else:
            current.append(token)
    text = "\n".join([*documents, tokenizer.decode(current)])
    head = tokenizer.decode(prompt)
    console.print(f"[bold]sample:[/] [cyan]{escape(head)}[/] {PROMPT_END}{escape(text[len(head) :])}")
