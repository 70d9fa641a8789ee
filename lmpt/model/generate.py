"""Sampling from a decoder: recompute logits over the last max_seq_len tokens each step (no KV cache yet)."""

from __future__ import annotations

import torch

from lmpt.model.language_model import LanguageModel


@torch.no_grad()
def sample(
    model: LanguageModel,
    prompt_ids: list[int],
    max_new_tokens: int,
    temperature: float = 0.8,
    top_k: int | None = 50,
    generator: torch.Generator | None = None,
    eos_id: int | None = None,
) -> list[int]:
    """The new tokens only (prompt excluded), at most max_new_tokens, stopping before eos_id.
    temperature <= 0 means greedy; top_k None or <= 0 samples from the whole vocabulary.
    `generator` must live on the model's device."""
    if not prompt_ids:
        raise ValueError("sample() needs at least one prompt token")
    was_training = model.training
    model.eval()
    device = model.head_weight.device
    ids = list(prompt_ids)
    new: list[int] = []
    try:
        for _ in range(max_new_tokens):
            window = torch.tensor([ids[-model.max_seq_len :]], device=device)
            logits = model.logits(window)[0, -1].float()
            if temperature <= 0:
                token = int(logits.argmax())
            else:
                logits = logits / temperature
                if top_k is not None and 0 < top_k < logits.numel():
                    kth = torch.topk(logits, top_k).values[-1]
                    logits = logits.masked_fill(logits < kth, float("-inf"))
                token = int(torch.multinomial(logits.softmax(-1), 1, generator=generator))
            if eos_id is not None and token == eos_id:
                break
            ids.append(token)
            new.append(token)
    finally:
        model.train(was_training)
    return new
