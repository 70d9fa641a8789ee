"""`lmpt-generate RUN prompt="..."`: a decoder continues the prompt (sampling with a key-value cache); an
encoder-decoder fills the sentinel spans (<extra_id_0> ...) of the prompt; a masked diffusion encoder (mdlm) writes
after the prompt by iterative unmasking over `steps` steps. Other encoders are refused."""

from __future__ import annotations

import json
from dataclasses import dataclass

import torch
from rich.markup import escape

from lmpt.config.command_options import parse_command, require, run_command
from lmpt.console import console
from lmpt.errors import LmptError
from lmpt.inference.progress import WorkBar
from lmpt.inference.prompts import SENTINEL, encode_marked
from lmpt.model.generate import sample, unmask
from lmpt.objectives.base import Sampling
from lmpt.rng import generator
from lmpt.rundir.trained import RUN_ARGUMENT, Trained, load_trained
from lmpt.train.placement import take_threads

PROG = "lmpt-generate"
SUMMARY = (
    "Sample from a trained decoder (continue the prompt) or fill the <extra_id_N> spans of the prompt with an "
    "encoder-decoder. Encoders predict [MASK] tokens instead: use lmpt-fill."
)
POSITIONALS = [RUN_ARGUMENT]


@dataclass
class GenerateOptions:
    prompt: str = ""
    """Text to continue (decoder) or text with <extra_id_0>, <extra_id_1>, ... spans to fill (encoder-decoder)."""
    max_tokens: int = 64
    """Most tokens to generate (the decoder stops earlier at an end of document)."""
    temperature: float = 0.8
    """Softmax temperature; 0 picks the most likely token every time (greedy)."""
    top_k: int = 50
    """Sample among the k most likely tokens only; 0 = the whole vocabulary."""
    top_p: float = 0.95
    """Then among the most likely tokens whose probabilities add up to top_p; 1 = no cut."""
    steps: int = 64
    """Masked diffusion runs (mdlm): iterative-unmasking steps over the max_tokens new tokens (at most one step per
    token; fewer steps unmask more tokens at once). Other runs ignore it."""
    seed: int = 0
    """Seed of the sampling draws: the same seed gives the same text."""
    device: str = "cpu"
    """cpu, cuda or auto."""
    json: bool = False
    """Print one JSON object (prompt, text, tokens) instead of coloured text."""


def _check(o: GenerateOptions) -> None:
    require(o.max_tokens >= 1, f"max_tokens={o.max_tokens} must be at least 1")
    require(o.temperature >= 0, f"temperature={o.temperature} must be >= 0 (0 = greedy)")
    require(o.top_k >= 0, f"top_k={o.top_k} must be >= 0 (0 = no cut)")
    require(0 < o.top_p <= 1, f"top_p={o.top_p} must be in (0, 1]")
    require(o.steps >= 1, f"steps={o.steps} must be at least 1 (iterative-unmasking steps)")


def continue_text(trained: Trained, o: GenerateOptions, bar: WorkBar) -> dict:
    """A decoder's continuation of the prompt, which follows an eos as every training document does."""
    tok = trained.tokenizer
    prompt_ids = [tok.special.eos, *tok.encode(o.prompt)]
    new = sample(
        trained.model,
        prompt_ids,
        o.max_tokens,
        o.temperature,
        o.top_k,
        generator(o.seed, "generate"),
        eos_id=tok.special.eos,
        top_p=o.top_p,
        vocab_size=tok.vocab_size,
        on_token=bar.advance,
    )
    text = tok.decode(prompt_ids[1:] + new)
    prompt_text = tok.decode(prompt_ids[1:])
    return {"prompt": prompt_text, "text": text, "continuation": text[len(prompt_text) :], "tokens": len(new)}


def unmask_text(trained: Trained, o: GenerateOptions, bar: WorkBar) -> dict:
    """A masked diffusion encoder's max_tokens tokens after the prompt, unmasked over o.steps steps."""
    tok = trained.tokenizer
    prompt_ids = tok.encode(o.prompt)
    never = tok.special.reserved_mask(tok.vocab_size)
    never[tok.special.eos] = False  # training text holds eos between documents, no other reserved id
    new = unmask(
        trained.model,
        prompt_ids,
        o.max_tokens,
        o.steps,
        o.temperature,
        generator(o.seed, "generate"),
        mask_id=tok.special.mask,
        never=never,
        on_step=bar.advance,
    )
    text, prompt_text = tok.decode(prompt_ids + new), tok.decode(prompt_ids)
    return {
        "prompt": prompt_text,
        "text": text,
        "continuation": text[len(prompt_text) :],
        "tokens": len(new),
        "steps": min(o.steps, o.max_tokens),
    }


def fill_spans(trained: Trained, o: GenerateOptions, bar: WorkBar) -> dict:
    """An encoder-decoder's target for the prompt's sentinels, and the prompt with each span filled in."""
    tok, special = trained.tokenizer, trained.tokenizer.special
    sentinels = {int(m.group(1)) for m in SENTINEL.finditer(o.prompt)}
    if not sentinels:
        raise LmptError(
            f"prompt={o.prompt!r} has no span to fill: an encoder-decoder fills <extra_id_0>, <extra_id_1>, ... "
            'e.g. prompt="The <extra_id_0> sat on the mat."'
        )
    if max(sentinels) >= special.num_sentinels:
        raise LmptError(f"<extra_id_{max(sentinels)}> is beyond the tokenizer's {special.num_sentinels} sentinels")
    ids = encode_marked(tok, o.prompt, SENTINEL)
    encoder_ids = [*trained.objective.span_filling_prefix(special), *ids, special.eos]  # ul2-mixture: [NLU]
    if len(encoder_ids) > trained.model.max_seq_len:
        raise LmptError(f"the prompt has {len(encoder_ids)} tokens; the model takes {trained.model.max_seq_len}")
    target = sample(
        trained.model,
        [special.bos],
        o.max_tokens,
        o.temperature,
        o.top_k,
        generator(o.seed, "generate"),
        eos_id=special.eos,
        top_p=o.top_p,
        vocab_size=tok.vocab_size,
        encoder_ids=encoder_ids,
        on_token=bar.advance,
    )
    spans: dict[int, list[int]] = {}
    current: list[int] | None = None
    for token in target:
        if special.sentinel_number(token) is not None:
            current = spans.setdefault(token, [])
        elif current is not None:
            current.append(token)
    filled: list[int] = []
    for i in ids:
        if special.sentinel_number(i) is not None:
            filled.extend(spans.get(i, []))
        else:
            filled.append(i)
    return {
        "prompt": o.prompt,
        "text": tok.decode(filled),
        "spans": {f"<extra_id_{s}>": tok.decode(spans.get(special.sentinel(s), [])) for s in sorted(sentinels)},
        "target": tok.decode(target),
        "tokens": len(target),
    }


def generate(argv: list[str]) -> None:
    (run,), o = parse_command(argv, PROG, SUMMARY, POSITIONALS, GenerateOptions)
    _check(o)
    take_threads()  # its slot's threads, else the cores free of other work (lmpt.train.placement)
    trained = load_trained(run, o.device)
    sampling = trained.objective.sampling(trained.arch)  # the objective says how its runs write
    if sampling is Sampling.NONE:
        raise LmptError(
            f"{run} is an encoder ({trained.objective_name}), which predicts masked tokens rather than generating: "
            f'use lmpt-fill {run} text="... [MASK] ..."'
        )
    with torch.inference_mode(), WorkBar("generating tokens", hidden=o.json) as bar:
        bar.start(o.max_tokens)  # at most: a decoder may stop earlier at an end of document
        write = {Sampling.UNMASK: unmask_text, Sampling.CONTINUE: continue_text, Sampling.FILL_SPANS: fill_spans}
        result = write[sampling](trained, o, bar)
    if o.json:
        print(json.dumps(result))
    elif sampling is not Sampling.FILL_SPANS:
        console.print(f"[cyan]{escape(result['prompt'])}[/]{escape(result['continuation'])}", emoji=False)
    else:  # emoji=False: model text such as ":a:" is printed as written, never as an emoji
        console.print(escape(result["text"]), emoji=False)
        for sentinel, span in result["spans"].items():
            console.print(f"  [cyan]{escape(sentinel)}[/] -> [bold]{escape(span)}[/]", emoji=False)


def main() -> None:
    run_command(generate)


if __name__ == "__main__":
    main()
