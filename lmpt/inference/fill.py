"""`lmpt-fill RUN text="The chef [MASK] a delicious meal."`: an encoder's top-k tokens for each [MASK];
`lmpt-fill RUN prefix="def add(a, b):" suffix="return c"`: a fim decoder's middle between the two."""

from __future__ import annotations

import json
from dataclasses import dataclass

import torch
from rich.markup import escape
from rich.table import Table

from lmpt.config.command_options import parse_command, require, run_command
from lmpt.console import console, print_whole
from lmpt.errors import LmptError
from lmpt.inference.infill import infill
from lmpt.inference.progress import WorkBar
from lmpt.inference.prompts import MASK_MARKER, encode_marked
from lmpt.rundir.trained import RUN_ARGUMENT, Trained, load_trained, require_token_head
from lmpt.tokenizer.special import MASK
from lmpt.train.placement import take_threads

PROG = "lmpt-fill"
SUMMARY = (
    "List the most likely tokens for each [MASK] in a text, from a trained encoder (mlm or nsp); or write the "
    "middle between prefix= and suffix= with a decoder trained with objective=fim. Other decoders and "
    "encoder-decoders generate instead: use lmpt-generate."
)
POSITIONALS = [RUN_ARGUMENT]


@dataclass
class FillOptions:
    text: str = ""
    """Encoder: text with one or more [MASK] tokens, each standing for one token."""
    top_k: int = 5
    """Candidates listed per [MASK]."""
    prefix: str = ""
    """fim decoder: the text before the middle to write."""
    suffix: str = ""
    """fim decoder: the text after the middle to write."""
    max_tokens: int = 64
    """fim decoder: most tokens of the middle (it stops earlier at an end of document)."""
    temperature: float = 0.0
    """fim decoder: softmax temperature of the middle's tokens; 0 picks the most likely token (greedy)."""
    seed: int = 0
    """fim decoder: seed of the sampling draws (temperature > 0)."""
    device: str = "cpu"
    """cpu, cuda or auto."""
    json: bool = False
    """Print one JSON object (the text with the best candidates filled in, candidates per mask) instead of tables."""


def predict_masks(trained: Trained, text: str, top_k: int) -> dict:
    """Top-k (piece, text, probability) per [MASK] of `text`, and the text with each mask's best token.
    Probabilities are over the ordinary pieces, the only tokens training ever asked the encoder to predict."""
    tok, special, model = trained.tokenizer, trained.tokenizer.special, trained.model
    ids = encode_marked(tok, text, MASK_MARKER)
    if special.mask not in ids:
        raise LmptError(f'text={text!r} has no {MASK} to fill: e.g. text="The chef {MASK} a delicious meal."')
    segment_ids = None
    before, after = trained.objective.text_frame(special)  # nsp: [CLS] text [SEP], a one-segment pair
    ids = [*before, *ids, *after]
    if trained.objective.n_segments:
        segment_ids = torch.zeros(1, len(ids), dtype=torch.long, device=model.head_weight.device)
    if len(ids) > model.max_seq_len:
        raise LmptError(f"the text has {len(ids)} tokens; the model takes {model.max_seq_len}")
    input_ids = torch.tensor([ids], device=model.head_weight.device)
    hidden = model.body(input_ids, segment_ids=segment_ids)[0]
    positions = [i for i, t in enumerate(ids) if t == special.mask]
    logits = (hidden[positions] @ model.head_weight.t()).float()
    ordinary = torch.zeros(logits.shape[-1], dtype=torch.bool, device=logits.device)
    ordinary[special.ordinary_ids(tok.vocab_size).to(logits.device)] = True
    logits[:, ~ordinary] = float("-inf")  # mlm labels are ordinary pieces only (not the vocabulary's padding)
    probs = logits.softmax(-1)
    best = probs.topk(min(top_k, probs.shape[-1]), dim=-1)
    masks, filled = [], list(ids)
    for n, position in enumerate(positions):
        candidates = [
            {"token": tok.id_to_piece(i), "text": tok.decode([i]), "probability": float(p)}
            for p, i in zip(best.values[n].tolist(), best.indices[n].tolist(), strict=True)
        ]
        masks.append({"position": position, "candidates": candidates})
        filled[position] = int(best.indices[n, 0])
    reserved = {special.cls, special.sep}
    return {"text": text, "filled": tok.decode(t for t in filled if t not in reserved), "masks": masks}


def render(result: dict) -> None:
    console.print(f"[bold]{escape(result['filled'])}[/]")
    for n, mask in enumerate(result["masks"]):
        table = Table(title=f"{MASK} {n + 1} of {len(result['masks'])}", title_justify="left")
        table.add_column("rank", justify="right")
        table.add_column("token")
        table.add_column("probability", justify="right")
        for rank, c in enumerate(mask["candidates"], start=1):
            table.add_row(str(rank), escape(c["token"]), f"{c['probability']:.4f}")
        print_whole(table)


def fill_middle(run: str, trained: Trained, o: FillOptions) -> None:
    """A fim decoder's middle between prefix= and suffix=, printed with the middle in bold."""
    require(bool(o.prefix or o.suffix), f'give prefix= and/or suffix=, e.g. lmpt-fill {run} prefix="..." suffix="..."')
    require(o.max_tokens >= 1, f"max_tokens={o.max_tokens} must be at least 1")
    require(o.temperature >= 0, f"temperature={o.temperature} must be >= 0 (0 = greedy)")
    with torch.inference_mode(), WorkBar("writing the middle", hidden=o.json) as bar:
        bar.start(o.max_tokens)
        result = infill(trained, o.prefix, o.suffix, o.max_tokens, o.temperature, o.seed, bar)
    if o.json:
        print(json.dumps(result))
    else:
        console.print(f"[cyan]{escape(o.prefix)}[/][bold]{escape(result['middle'])}[/][cyan]{escape(o.suffix)}[/]")


def fill(argv: list[str]) -> None:
    (run,), o = parse_command(argv, PROG, SUMMARY, POSITIONALS, FillOptions)
    require(o.top_k >= 1, f"top_k={o.top_k} must be at least 1")
    take_threads()  # its slot's threads, else the cores free of other work (lmpt.train.placement)
    trained = load_trained(run, o.device)
    if trained.arch == "decoder" and (o.prefix or o.suffix or trained.objective.fills_middle):
        fill_middle(run, trained, o)
        return
    if trained.arch != "encoder":
        raise LmptError(
            f"{run} is {'a decoder' if trained.arch == 'decoder' else 'an encoder-decoder'} "
            f"({trained.objective_name}); lmpt-fill needs an encoder (mlm or nsp): use lmpt-generate {run} prompt=..."
        )
    require_token_head(trained, PROG)
    with torch.inference_mode():
        result = predict_masks(trained, o.text, o.top_k)
    if o.json:
        print(json.dumps(result))
    else:
        render(result)


def main() -> None:
    run_command(fill)


if __name__ == "__main__":
    main()
