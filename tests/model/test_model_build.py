"""build_model validation, parameter counting on meta, FLOPs and sampling."""

from pathlib import Path

import pytest
import torch
from model_helpers import PAD, VOCAB, tiny_config, tiny_model
from omegaconf import OmegaConf

from lmpt.config.schema import ModelConfig
from lmpt.errors import LmptError
from lmpt.model import LanguageModel, build_model, count_parameters
from lmpt.model.generate import sample

CONF = Path(__file__).resolve().parents[2] / "conf" / "model"
ARCHS = ("decoder", "encoder", "encoder-decoder")


def preset(name: str) -> ModelConfig:
    raw = OmegaConf.load(CONF / f"{name}.yaml")
    raw.pop("defaults", None)
    return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(ModelConfig), raw))  # type: ignore[return-value]


def test_n_heads_must_divide_d_model() -> None:
    with pytest.raises(LmptError, match=r"model.n_heads=5 does not divide model.d_model=32"):
        build_model(tiny_config(n_heads=5), "decoder", VOCAB, PAD)


def test_head_dim_must_be_even() -> None:
    with pytest.raises(LmptError, match="must be even"):
        build_model(tiny_config(d_model=36, n_heads=12), "decoder", VOCAB, PAD)


def test_unknown_arch_is_refused() -> None:
    with pytest.raises(LmptError, match="model.arch"):
        build_model(tiny_config(), "rnn", VOCAB, PAD)


@pytest.mark.parametrize("arch", ARCHS)
def test_meta_count_matches_real_build(arch: str) -> None:
    cfg = preset("tiny")
    real = build_model(cfg, arch, 8192, PAD)
    assert count_parameters(cfg, arch, 8192) == real.num_parameters()
    assert real.num_parameters() - real.num_parameters(non_embedding=True) == 8192 * cfg.d_model


def test_presets_count_quickly_on_meta() -> None:
    counts = {
        (name, arch): count_parameters(preset(name), arch, 8192)
        for name in ("tiny", "small", "base", "large")
        for arch in ARCHS
    }
    for arch in ARCHS:
        sizes = [counts[(name, arch)] for name in ("tiny", "small", "base", "large")]
        assert sizes == sorted(sizes)
    # Decoder and encoder are the same stack; the encoder-decoder adds a decoder with cross-attention.
    assert counts[("base", "decoder")] == counts[("base", "encoder")]
    assert counts[("base", "encoder-decoder")] > 1.9 * counts[("base", "decoder")] - 8192 * 768


def test_init_scales_output_projections() -> None:
    torch.manual_seed(0)
    model = build_model(tiny_config(d_model=256, n_heads=4, ffn_dim=512, n_layers=8), "decoder", VOCAB, PAD)
    block = model.body.stack.blocks[0]
    assert abs(block.attn.qkv.weight.std().item() - 0.02) < 0.002
    assert abs(block.attn.o.weight.std().item() - 0.02 / 4) < 0.0005
    assert abs(block.mlp.down.weight.std().item() - 0.02 / 4) < 0.0005
    assert torch.equal(block.attn_norm.weight, torch.ones(256))


def test_flops_follow_the_formula() -> None:
    model = tiny_model("decoder")
    d, layers, s = 32, 2, 16
    n_mm = layers * (4 * d * d + 3 * d * 64) + VOCAB * d
    assert model.flops_per_example(s) == pytest.approx(s * (6 * n_mm + 12 * layers * d * s))
    encdec = tiny_model("encoder-decoder")
    assert encdec.flops_per_example(16, 8) > model.flops_per_example(16)


def test_sample_is_reproducible_and_stops_at_eos() -> None:
    model: LanguageModel = tiny_model("decoder")
    a = sample(model, [1, 2, 3], 10, generator=torch.Generator().manual_seed(0))
    b = sample(model, [1, 2, 3], 10, generator=torch.Generator().manual_seed(0))
    assert a == b and len(a) == 10 and all(0 <= t < VOCAB for t in a)
    greedy = sample(model, [1, 2, 3], 5, temperature=0)
    eos = greedy[-1]
    assert sample(model, [1, 2, 3], 5, temperature=0, eos_id=eos) == greedy[: greedy.index(eos)]
    long = sample(model, list(range(1, 70)), 2, top_k=None, generator=torch.Generator().manual_seed(1))
    assert len(long) == 2  # prompt longer than max_seq_len=64 is cropped, not refused
