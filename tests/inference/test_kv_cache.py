"""Cached generation is uncached generation, token for token, for decoders and encoder-decoders."""

from __future__ import annotations

import pytest
import torch

from lmpt.config.schema import ModelConfig
from lmpt.model import build_model
from lmpt.model.generate import IncrementalDecoding, pick_token, sample

CFG = ModelConfig(name="test", d_model=64, n_layers=2, n_heads=4, ffn_dim=96, max_seq_len=24)


def _model(arch: str) -> torch.nn.Module:
    torch.manual_seed(0)
    return build_model(CFG, arch, vocab_size=200, pad_id=0).eval()


@pytest.mark.parametrize("arch", ["decoder", "encoder-decoder"])
def test_cached_greedy_equals_uncached(arch: str) -> None:
    model = _model(arch)
    encoder_ids = [5, 17, 40, 99, 3] if arch == "encoder-decoder" else None
    prompt = [2, 11, 12, 13]
    cached = sample(model, prompt, 20, temperature=0, encoder_ids=encoder_ids)
    uncached = sample(model, prompt, 20, temperature=0, encoder_ids=encoder_ids, use_cache=False)
    assert len(cached) == 20
    assert cached == uncached


@pytest.mark.parametrize("arch", ["decoder", "encoder-decoder"])
def test_cached_logits_match_every_step(arch: str) -> None:
    """Not only the argmax: the next-token logits agree at every position up to max_seq_len."""
    model = _model(arch)
    encoder_ids = [5, 17, 40, 99, 3] if arch == "encoder-decoder" else None
    tokens = torch.randint(10, 200, (CFG.max_seq_len,), generator=torch.Generator().manual_seed(1)).tolist()
    with torch.no_grad():
        cached = IncrementalDecoding(model, encoder_ids, use_cache=True)
        plain = IncrementalDecoding(model, encoder_ids, use_cache=False)
        first = torch.testing.assert_close
        first(cached.feed(tokens[:5]), plain.feed(tokens[:5]), atol=1e-5, rtol=1e-5)
        for t in tokens[5:]:
            first(cached.feed([t]), plain.feed([t]), atol=1e-5, rtol=1e-5)
        assert cached.cache.length == CFG.max_seq_len


def test_decoder_cache_matches_full_forward() -> None:
    model = _model("decoder")
    ids = torch.randint(10, 200, (1, 16), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        full = model.logits(ids)[0]
        decoding = IncrementalDecoding(model)
        steps = [decoding.feed(ids[0, :1].tolist())] + [decoding.feed([int(t)]) for t in ids[0, 1:]]
    torch.testing.assert_close(torch.stack(steps), full, atol=1e-5, rtol=1e-5)


def test_generation_beyond_max_seq_len_crops_the_cache() -> None:
    model = _model("decoder")
    out = sample(model, [2, 3], 3 * CFG.max_seq_len, temperature=1.0, generator=torch.Generator().manual_seed(0))
    assert len(out) == 3 * CFG.max_seq_len


def test_seeded_sampling_is_reproducible_and_top_p_cuts() -> None:
    model = _model("decoder")
    draw = lambda: sample(model, [2, 11], 12, top_p=0.9, generator=torch.Generator().manual_seed(7))
    assert draw() == draw()
    logits = torch.tensor([5.0, 4.0, 0.0, -1.0])
    gen = torch.Generator().manual_seed(0)
    # top_p=0.5: the most likely token alone holds more than half of the mass
    assert {pick_token(logits, 1.0, None, 0.5, gen) for _ in range(50)} == {0}
    assert {pick_token(logits, 1.0, 2, None, gen) for _ in range(200)} == {0, 1}
    assert pick_token(logits, 0.0, None, None, None) == 0
