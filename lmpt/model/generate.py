"""Sampling with a key-value cache: the prompt is run once (prefill), then one token per step, each attending
over the cached keys and values of every earlier position. Serves decoders and the decoder of an
encoder-decoder (whose encoder runs once). A masked diffusion encoder samples by iterative unmasking (`unmask`)."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from lmpt.batch import Batch
from lmpt.errors import LmptError
from lmpt.model.attention import Rope
from lmpt.model.language_model import LanguageModel
from lmpt.model.stacks import Decoder, Encoder, EncoderDecoder, Stack, padding_mask_if_any
from lmpt.model.t5 import biased_mask

KeyValues = tuple[torch.Tensor, torch.Tensor]


class KVCache:
    """Keys and values [B, n_kv_heads, P, hd] of each self-attention layer of one stack, for positions 0..P-1."""

    def __init__(self, n_layers: int) -> None:
        self.layers: list[KeyValues | None] = [None] * n_layers

    @property
    def length(self) -> int:
        first = self.layers[0]
        return 0 if first is None else first[0].shape[2]


def stack_forward_cached(
    stack: Stack,
    x: torch.Tensor,
    cache: KVCache,
    context: torch.Tensor | None = None,
    context_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """`Stack.forward` of causal self-attention for new positions x [B, S, d] after the `cache.length` cached
    ones (the cache grows by S): final-norm hidden states [B, S, d]. Eval only: dropout is not applied."""
    start, length = cache.length, x.shape[1]
    rope: Rope | None = (stack.rope_cos[start : start + length], stack.rope_sin[start : start + length])
    bias = None
    if stack.relative_bias is not None:  # t5 flavour: the position bias of the new queries over every key
        rope, bias = None, biased_mask(stack.relative_bias(length, start + length, start), None, causal=True)
    for i, block in enumerate(stack.layers):
        out, cache.layers[i] = block.attn.forward_cached(block.attn_norm(x), rope, cache.layers[i], bias)
        x = x + out
        if block.cross_attn is not None:
            assert block.cross_norm is not None and context is not None
            x = x + block.cross_attn(block.cross_norm(x), mask=context_mask, context=context)
        x = x + block.mlp(block.mlp_norm(x))
    return stack.norm(x)


class IncrementalDecoding:
    """Next-token logits of a growing sequence, for a decoder or (given `encoder_ids`) the decoder of an
    encoder-decoder. With `use_cache` each call runs only the new tokens; without, every call recomputes the
    last max_seq_len tokens (the reference the cache is tested against). When the sequence outgrows
    model.max_seq_len the cache is cropped: the most recent half of the window is run again from position 0,
    as the uncached window would see it."""

    def __init__(self, model: LanguageModel, encoder_ids: list[int] | None = None, use_cache: bool = True) -> None:
        body = model.body
        if isinstance(body, Encoder) or not isinstance(body, (Decoder, EncoderDecoder)):
            raise ValueError(f"generation needs a decoder or an encoder-decoder, this model is a {model.arch}")
        self.model = model
        self.use_cache = use_cache
        self.device = model.head_weight.device
        self.tokens: list[int] = []
        self.context: torch.Tensor | None = None
        self.context_mask: torch.Tensor | None = None
        if isinstance(body, EncoderDecoder):
            if not encoder_ids:
                raise ValueError("an encoder-decoder needs encoder input ids")
            ids = torch.tensor([encoder_ids[: model.max_seq_len]], device=self.device)
            self.context = body.encoder(body.embed(ids), None, False)
            self.context_mask = padding_mask_if_any(ids, body.pad_id)
            self.stack = body.decoder
        else:
            self.stack = body.stack
        self.cache = KVCache(len(self.stack.blocks))

    def feed(self, new_tokens: list[int]) -> torch.Tensor:
        """Append `new_tokens` (at least one); float32 logits [V] for the token after them."""
        if not new_tokens:
            raise ValueError("feed() needs at least one token")
        limit = self.model.max_seq_len
        self.tokens.extend(new_tokens)
        if not self.use_cache:
            hidden = self._hidden_uncached(self.tokens[-limit:])
        else:
            if self.cache.length + len(new_tokens) > limit:
                keep = max(limit // 2, min(len(new_tokens), limit))
                self.cache = KVCache(len(self.stack.blocks))
                new_tokens = self.tokens[-keep:]
            ids = torch.tensor([new_tokens], device=self.device)
            x = self.model.body.embed(ids)
            hidden = stack_forward_cached(self.stack, x, self.cache, self.context, self.context_mask)
        return (hidden[0, -1] @ self.model.head_weight.t()).float()

    def _hidden_uncached(self, window: list[int]) -> torch.Tensor:
        ids = torch.tensor([window], device=self.device)
        body = self.model.body
        if isinstance(body, EncoderDecoder):
            x = body.embed(ids)
            return body.decoder(x, None, True, self.context, self.context_mask)
        return body(ids, "causal")


def pick_token(
    logits: torch.Tensor,
    temperature: float,
    top_k: int | None,
    top_p: float | None,
    generator: torch.Generator | None,
) -> int:
    """Greedy for temperature <= 0; else a draw from softmax(logits / temperature) restricted to the top_k
    most likely tokens (None or <= 0: all) and then to the smallest set whose probability reaches top_p
    (None or >= 1: all). Draws happen on the CPU, so a seed gives the same text on any device. Logits are shifted
    so the largest is 0 before dividing (in float64): a temperature as small as 1e-300 gives the greedy token
    rather than an overflow; one that is not a finite number is refused."""
    if not math.isfinite(temperature):
        raise LmptError(f"temperature={temperature} must be a finite number (0 or less: greedy)")
    logits = logits.float().cpu()
    if temperature <= 0:
        return int(logits.argmax())
    logits = (logits.double() - logits.max().double()) / temperature
    if top_k is not None and 0 < top_k < logits.numel():
        kth = torch.topk(logits, top_k).values[-1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = logits.softmax(-1)
    if top_p is not None and 0 < top_p < 1:
        sorted_probs, order = probs.sort(descending=True)
        before = sorted_probs.cumsum(0) - sorted_probs  # mass of the more likely tokens
        sorted_probs[before >= top_p] = 0.0  # the most likely token always stays (before = 0)
        probs = torch.zeros_like(probs).scatter_(0, order, sorted_probs)
    return int(torch.multinomial(probs, 1, generator=generator))


@torch.no_grad()
def sample(
    model: LanguageModel,
    prompt_ids: list[int],
    max_new_tokens: int,
    temperature: float = 0.8,
    top_k: int | None = 50,
    generator: torch.Generator | None = None,
    eos_id: int | None = None,
    top_p: float | None = None,
    encoder_ids: list[int] | None = None,
    use_cache: bool = True,
    on_token: Callable[[], None] | None = None,
    vocab_size: int | None = None,
) -> list[int]:
    """The new tokens only (prompt excluded), at most max_new_tokens, stopping before eos_id.
    A decoder continues `prompt_ids`; an encoder-decoder's decoder continues them (e.g. [bos]) while
    attending to `encoder_ids`. See `pick_token` for temperature, top_k, top_p; `generator` is a CPU one.
    `on_token` is called after each new token (a progress bar). `vocab_size`: the tokenizer's; the model's
    padding rows above it are never drawn."""
    if not prompt_ids:
        raise ValueError("sample() needs at least one prompt token")
    was_training = model.training
    model.eval()
    new: list[int] = []
    try:
        decoding = IncrementalDecoding(model, encoder_ids, use_cache)
        logits = decoding.feed(list(prompt_ids))
        for step in range(max_new_tokens):
            if vocab_size is not None:
                logits[vocab_size:] = float("-inf")
            token = pick_token(logits, temperature, top_k, top_p, generator)
            if eos_id is not None and token == eos_id:
                break
            new.append(token)
            if on_token is not None:
                on_token()
            if step + 1 < max_new_tokens:
                logits = decoding.feed([token])
    finally:
        model.train(was_training)
    return new


@torch.no_grad()
def unmask(
    model: LanguageModel,
    prompt_ids: list[int],
    length: int,
    steps: int,
    temperature: float,
    gen: torch.Generator,
    mask_id: int,
    never: torch.Tensor,
    on_step: Callable[[int], None] | None = None,
) -> list[int]:
    """`length` tokens after the prompt from a masked diffusion encoder, by iterative unmasking (LLaDA's sampler with
    low-confidence remasking): start all [MASK]; at each of `steps` steps predict every masked position, draw a token
    for each (temperature 0: the most likely), and keep the most confident of them, so many that the masks run out
    evenly over the steps; the rest are masked again. [MASK] and the ids `never` [<= model vocab] marks (the reserved
    ids no text holds, those past the tokenizer's) are never drawn."""
    if steps < 1:
        raise LmptError(f"steps={steps} must be at least 1")
    total = len(prompt_ids) + length
    if total > model.max_seq_len:
        raise LmptError(f"the prompt and {length} new tokens make {total}; the model takes {model.max_seq_len}")
    device = next(model.parameters()).device
    ids = torch.tensor([[*prompt_ids, *[mask_id] * length]], device=device)
    steps = min(steps, length) if length else 0
    for step in range(steps):
        masked = ids[0] == mask_id
        remaining = int(masked.sum())
        take = remaining // (steps - step) + (1 if remaining % (steps - step) else 0)  # the masks end on the last step
        batch = Batch(input_ids=ids, labels=ids, attention="bidirectional")
        logits = (model.hidden_states(batch)[0] @ model.head_weight.t()).float()
        logits[:, mask_id] = -math.inf
        logits[:, : len(never)] = logits[:, : len(never)].masked_fill(never.to(device), -math.inf)
        logits[:, len(never) :] = -math.inf
        if temperature > 0:
            probs = torch.softmax(logits / temperature, dim=-1)
            drawn = torch.multinomial(probs.cpu(), 1, generator=gen)[:, 0].to(device)
        else:
            probs = torch.softmax(logits, dim=-1)
            drawn = probs.argmax(dim=-1)
        confidence = probs.gather(1, drawn[:, None])[:, 0].masked_fill(~masked, -1.0)
        keep = confidence.topk(take).indices
        ids[0, keep] = drawn[keep]
        if on_step is not None:
            on_step(take)
    return ids[0, len(prompt_ids) :].tolist()
