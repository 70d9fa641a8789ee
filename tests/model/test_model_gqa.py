"""Grouped-query attention: shared key/value heads are the same attention as repeating them, the KV cache
generates what the uncached path does, and the FLOP count shrinks by the smaller projections."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from model_helpers import VOCAB, random_ids, tiny_config

from lmpt.errors import LmptError
from lmpt.model import build_model
from lmpt.model.attention import Attention
from lmpt.model.generate import IncrementalDecoding, sample


def test_shared_heads_equal_repeated_heads() -> None:
    """Query head h reads key/value head h // (n_heads / n_kv_heads), as in Llama's repeat_kv."""
    torch.manual_seed(0)
    attn = Attention(32, n_heads=4, n_kv_heads=2)
    assert attn.qkv.weight.shape == (32 + 2 * 16, 32)
    x = torch.randn(2, 5, 32)
    w = attn.split_projections()
    q = (x @ w["q"].t()).view(2, 5, 4, 8).transpose(1, 2)
    k, v = ((x @ w[n].t()).view(2, 5, 2, 8).transpose(1, 2).repeat_interleave(2, dim=1) for n in "kv")
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(2, 5, 32)
    torch.testing.assert_close(attn(x, is_causal=True), expected @ w["o"].t())


@pytest.mark.parametrize("arch", ["decoder", "encoder-decoder"])
def test_cached_greedy_equals_uncached_with_shared_heads(arch: str) -> None:
    torch.manual_seed(0)
    model = build_model(tiny_config(n_kv_heads=1, max_seq_len=24), arch, VOCAB, 0).eval()
    encoder_ids = [5, 17, 40, 99, 3] if arch == "encoder-decoder" else None
    cached = sample(model, [2, 11, 12], 30, temperature=0, encoder_ids=encoder_ids)
    uncached = sample(model, [2, 11, 12], 30, temperature=0, encoder_ids=encoder_ids, use_cache=False)
    assert len(cached) == 30 and cached == uncached
    decoding = IncrementalDecoding(model, encoder_ids)
    decoding.feed([2, 11, 12])
    assert decoding.cache.layers[0][0].shape == (1, 1, 3, 8)  # one key head cached, not four


def test_decoder_logits_match_cached_steps_with_shared_heads() -> None:
    torch.manual_seed(0)
    model = build_model(tiny_config(n_kv_heads=2), "decoder", VOCAB, 0).eval()
    ids = random_ids(1, 12)
    with torch.no_grad():
        decoding = IncrementalDecoding(model)
        steps = [decoding.feed(ids[0, :1].tolist())] + [decoding.feed([int(t)]) for t in ids[0, 1:]]
        torch.testing.assert_close(torch.stack(steps), model.logits(ids)[0], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("arch", ["decoder", "encoder-decoder"])
def test_flops_count_the_smaller_key_value_projections(arch: str) -> None:
    full = build_model(tiny_config(), arch, VOCAB, 0)
    grouped = build_model(tiny_config(n_kv_heads=1), arch, VOCAB, 0)
    d, kv, layers = 32, 8, 2
    saved_per_block = 2 * d * (d - kv)  # k and v shrink from d x d to kv x d
    assert full.num_parameters() - grouped.num_parameters() == saved_per_block * layers * (
        1 if arch == "decoder" else 3  # encoder blocks, decoder self- and cross-attention
    )
    seq = 16
    if arch == "decoder":
        expected = 6.0 * seq * saved_per_block * layers
        assert full.flops_per_example(seq) - grouped.flops_per_example(seq) == pytest.approx(expected)
    else:  # every projection runs once per token of its stream: encoder self + cross k/v on seq, decoder self on 8
        expected = 6.0 * (seq * saved_per_block * 2 * layers + 8 * saved_per_block * layers)
        assert full.flops_per_example(seq, 8) - grouped.flops_per_example(seq, 8) == pytest.approx(expected)


def test_kv_heads_must_divide_heads() -> None:
    with pytest.raises(LmptError, match="n_kv_heads=3"):
        build_model(tiny_config(n_kv_heads=3), "decoder", VOCAB, 0)
