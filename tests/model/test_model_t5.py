"""model.flavour=t5: lmpt's encoder-decoder is exactly transformers' T5ForConditionalGeneration (T5 v1.1)
built here from a config with random weights, and its KV-cache generation is its uncached generation."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from model_helpers import VOCAB, random_ids, tiny_config
from omegaconf import OmegaConf
from safetensors.torch import save_file

from lmpt.errors import LmptError
from lmpt.hf.export import hf_config, hf_state_dict
from lmpt.model import build_model
from lmpt.model.generate import sample
from lmpt.model.t5 import relative_position_bucket
from lmpt.objectives.registry import objective_class

transformers = pytest.importorskip("transformers")


def t5_model(seed: int = 0, **overrides: object):
    torch.manual_seed(seed)
    cfg = tiny_config(flavour="t5", **overrides)
    model = build_model(cfg, "encoder-decoder", VOCAB, pad_id=0).eval()
    with torch.no_grad():  # norms start at one: make them matter
        for name, p in model.named_parameters():
            if "norm" in name:
                p.uniform_(0.5, 1.5)
    return model, cfg


def as_transformers(model, cfg, directory: Path) -> torch.nn.Module:
    """The model written with lmpt-export's own config and tensor table, read by from_pretrained."""
    special = SimpleNamespace(pad=0, bos=1, eos=2, mask=3)
    trained = SimpleNamespace(
        model=model,
        config=OmegaConf.create({"model": cfg}),
        tokenizer=SimpleNamespace(special=special),
        arch="encoder-decoder",
        objective_name="span",
        objective=objective_class("span"),
    )
    directory.mkdir()
    (directory / "config.json").write_text(json.dumps(hf_config(trained)))
    save_file(hf_state_dict(trained, torch.float32), str(directory / "model.safetensors"), metadata={"format": "pt"})
    reference = transformers.T5ForConditionalGeneration.from_pretrained(directory).eval()
    assert torch.equal(reference.lm_head.weight, model.lm_head.weight)  # untied: its own head, unscaled
    assert torch.equal(reference.shared.weight, model.body.embed.tokens.weight)
    return reference


@pytest.mark.parametrize("bidirectional", [True, False])
def test_buckets_are_t5s(bidirectional: bool) -> None:
    relative = torch.arange(-300, 300)[None, :]
    theirs = transformers.models.t5.modeling_t5.T5Attention._relative_position_bucket(relative, bidirectional, 32, 128)
    assert torch.equal(relative_position_bucket(relative, bidirectional, 32, 128), theirs)


def test_logits_equal_t5_for_conditional_generation(tmp_path: Path) -> None:
    model, cfg = t5_model(n_decoder_layers=3)
    reference = as_transformers(model, cfg, tmp_path / "t5")
    inputs, targets = random_ids(2, 40, seed=5), random_ids(2, 24, seed=6)
    inputs[1, 30:] = 0  # padding in the encoder input
    with torch.no_grad():
        ours = model.body(inputs, targets) @ model.head_weight.t()
        theirs = reference(input_ids=inputs, attention_mask=inputs != 0, decoder_input_ids=targets).logits
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)


def test_greedy_generation_equals_transformers_and_the_uncached_path(tmp_path: Path) -> None:
    model, cfg = t5_model(max_seq_len=32)  # as many decoder layers as encoder ones: transformers' T5 cache
    # sizes itself by num_layers, so generate() with a deeper decoder fails inside transformers
    encoder_ids = [5, 17, 40, 99, 3, 2]
    cached = sample(model, [1], 30, temperature=0, encoder_ids=encoder_ids)
    assert cached == sample(model, [1], 30, temperature=0, encoder_ids=encoder_ids, use_cache=False)
    reference = as_transformers(model, cfg, tmp_path / "t5")
    out = reference.generate(torch.tensor([encoder_ids]), max_new_tokens=12, do_sample=False, eos_token_id=None)
    assert out[0, 1:].tolist() == cached[:12]


def test_t5_flavour_is_for_encoder_decoders_without_shared_heads() -> None:
    with pytest.raises(LmptError, match="model.flavour=t5 is the T5 v1.1 encoder-decoder"):
        build_model(tiny_config(flavour="t5"), "decoder", VOCAB, 0)
    with pytest.raises(LmptError, match="no grouped-query attention"):
        build_model(tiny_config(flavour="t5", n_kv_heads=2), "encoder-decoder", VOCAB, 0)
