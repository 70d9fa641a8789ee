"""ElectraModel: one shared embedding, no gradient through the generator's sample, the reference's generator
sizing, a FLOP count that includes the generator, and a discriminator that is a plain encoder."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from lmpt.batch import IGNORE, Batch
from lmpt.config.schema import ModelConfig
from lmpt.errors import LmptError
from lmpt.model import build_model
from lmpt.model.electra import ElectraModel, discriminator_state, generator_config

VOCAB, PAD, MASK = 128, 0, 4


def config(**overrides: object) -> ModelConfig:
    values: dict = dict(name="test", d_model=64, n_layers=2, n_heads=2, ffn_dim=128, max_seq_len=32)
    values.update(overrides)
    return ModelConfig(**values)


def model(size: float = 0.25, **overrides: object) -> ElectraModel:
    torch.manual_seed(0)
    samplable = torch.arange(VOCAB) >= 10
    return ElectraModel(config(**overrides), VOCAB, PAD, samplable, size, temperature=1.0)


def batch(seed: int = 3) -> Batch:
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(10, VOCAB, (4, 24), generator=g)
    tokens[1, 20:] = PAD
    selected = (torch.rand(tokens.shape, generator=g) < 0.3) & (tokens != PAD)
    inputs = torch.where(selected, torch.full_like(tokens, MASK), tokens)
    labels = torch.where(selected, tokens, torch.full_like(tokens, IGNORE))
    return Batch(input_ids=inputs, labels=labels, attention="bidirectional", sample_seed=seed)


def test_one_embedding_serves_generator_discriminator_and_the_generator_head() -> None:
    m = model().train()
    embeddings = [mod for mod in m.modules() if isinstance(mod, nn.Embedding)]
    assert embeddings == [m.discriminator.body.embed.tokens] and m.embedding is embeddings[0]
    assert [k for k in m.state_dict() if "embed" in k] == ["discriminator.body.embed.tokens.weight"]
    for part in ("token_loss", "disc_loss"):  # each loss alone reaches the shared table
        m.zero_grad()
        getattr(m(batch()), part).mean().backward()
        assert m.embedding.weight.grad is not None and float(m.embedding.weight.grad.abs().sum()) > 0, part


def test_no_gradient_flows_through_the_sample() -> None:
    m = model().train()
    m(batch()).disc_loss.mean().backward()
    assert all(p.grad is None for p in m.generator.parameters())
    assert all(p.grad is not None for p in m.replaced_head.parameters())


def test_samples_are_seeded_by_the_batch() -> None:
    m = model()
    a, b, c = m(batch(seed=3)), m(batch(seed=3)), m(batch(seed=4))
    assert torch.equal(a.replaced, b.replaced) and torch.equal(a.disc_loss, b.disc_loss)
    assert not torch.equal(a.disc_loss, c.disc_loss)
    with pytest.raises(ValueError, match="sample_seed"):
        m(Batch(input_ids=batch().input_ids, labels=batch().labels, attention="bidirectional"))


def test_generator_is_sized_as_the_reference() -> None:
    """Width a fraction of d_model; heads keep the discriminator's head width; ffn shrinks alike; same depth
    (BERT-base 768/12 at 1/4 gives 192 wide, 3 heads of 64, ffn 768)."""
    base = generator_config(config(d_model=768, n_heads=12, ffn_dim=3072, n_kv_heads=4), 0.25)
    assert (base.d_model, base.n_heads, base.n_kv_heads, base.ffn_dim, base.n_layers) == (192, 3, None, 768, 2)
    small = generator_config(config(), 0.25)  # 16 wide: narrower than one 32-wide head, so one head of 16
    assert (small.d_model, small.n_heads, small.ffn_dim) == (16, 1, 32)
    with pytest.raises(LmptError, match=r"objective.generator_size=0.3 gives a generator 19 wide"):
        generator_config(config(), 0.3)


def test_flops_count_the_generator_and_the_replaced_token_head() -> None:
    """Per BENCHMARKS.md: 6 N_mm + 12 L d S per token, the generator's MLM head (transform + tied matmul) on the
    masked fraction, the discriminator's binary head on every position, its tied MLM head never."""
    m, seq, frac = model(), 24, 0.15
    d, w, v, layers, ffn_d, ffn_g = 64, 16, VOCAB, 2, 128, 32
    per_token_disc = 6 * layers * (4 * d * d + 3 * d * ffn_d) + 12 * layers * d * seq + 6 * (d * d + d)
    per_token_gen = (
        6 * (layers * (4 * w * w + 3 * w * ffn_g) + d * w) + 12 * layers * w * seq + 6 * (w * d + d * v) * frac
    )
    parts = m.flops_parts(seq, frac)
    assert parts["discriminator"] == pytest.approx(seq * per_token_disc)
    assert parts["generator"] == pytest.approx(seq * per_token_gen)
    assert m.flops_per_example(seq, 0, frac) == pytest.approx(sum(parts.values()))
    mlm = build_model(config(), "encoder", VOCAB, PAD)
    assert m.flops_per_example(seq, 0, frac) > mlm.flops_per_example(seq, 0, frac)


def test_the_discriminator_is_a_plain_encoder() -> None:
    m = model()
    encoder = build_model(config(), "encoder", VOCAB, PAD).eval()
    encoder.load_state_dict(discriminator_state(m.state_dict()), strict=True)
    ids = batch().input_ids
    torch.testing.assert_close(encoder.body(ids), m.discriminator.body(ids), rtol=0, atol=0)
    assert m.num_parameters() == sum(p.numel() for p in m.parameters())
    assert m.num_parameters(non_embedding=True) == m.num_parameters() - VOCAB * 64
