"""model.init_from reads Hugging Face directories built here from a config with random weights
(save_pretrained; nothing downloads): lmpt's logits equal transformers' in fp32, the weights export back
unchanged, and what does not fit is named."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from omegaconf import OmegaConf

from lmpt.config.schema import ModelConfig, TokenizerConfig
from lmpt.errors import LmptError
from lmpt.hf.names import llama_layout, to_hf
from lmpt.model import build_model
from lmpt.train.init_from import adopt_origin, check_tokenizer, load_origin, read_origin

transformers = pytest.importorskip("transformers")
VOCAB = 300


def save_llama(path: Path, n_kv_heads: int, seed: int = 0, **overrides: object) -> Path:
    """A random LlamaForCausalLM with tied embeddings, written by transformers itself."""
    torch.manual_seed(seed)
    config = transformers.LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=n_kv_heads,
        max_position_embeddings=128,
        rms_norm_eps=1e-5,
        rope_theta=500000.0,
        **{"tie_word_embeddings": True, **overrides},
    )
    model = transformers.LlamaForCausalLM(config)
    with torch.no_grad():  # norms start at one: make them matter
        for name, p in model.named_parameters():
            if "norm" in name:
                p.uniform_(0.5, 1.5)
    model.save_pretrained(path)
    return path


def lmpt_model_from(path: Path, arch: str = "decoder", **given: object):
    """What `lmpt model.init_from=path` builds: the adopted config, then the source's weights."""
    cfg = OmegaConf.create({"model": ModelConfig(name="tiny", **given), "tokenizer": TokenizerConfig()})
    origin = read_origin(str(path))
    cfg = adopt_origin(cfg, origin, {f"model.{k}" for k in given})
    model = build_model(cfg.model, arch, VOCAB, pad_id=0)
    load_origin(model, origin)
    return model.eval(), cfg


@pytest.mark.parametrize("n_kv_heads", [4, 2], ids=["mha", "gqa"])
def test_llama_logits_equal_transformers(tmp_path: Path, n_kv_heads: int) -> None:
    hf_dir = save_llama(tmp_path / "llama", n_kv_heads)
    model, cfg = lmpt_model_from(hf_dir)
    assert (cfg.model.d_model, cfg.model.n_kv_heads, cfg.model.rope_theta, cfg.model.stage) == (64, n_kv_heads, 5e5, 2)
    reference = transformers.LlamaForCausalLM.from_pretrained(hf_dir, torch_dtype=torch.float32).eval()
    ids = torch.randint(1, VOCAB, (2, 40), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        torch.testing.assert_close(model.logits(ids), reference(ids).logits, atol=1e-5, rtol=1e-5)
    # and back: the export table returns every tensor transformers saved, bit for bit
    exported = to_hf(llama_layout(model), model.state_dict(), torch.float32)
    saved = {k: v for k, v in reference.state_dict().items() if k != "lm_head.weight"}
    assert exported.keys() == saved.keys()
    assert all(torch.equal(exported[k], saved[k]) for k in saved)


def test_eurobert_encoder_logits_equal_transformers(tmp_path: Path) -> None:
    if not hasattr(transformers, "EuroBertForMaskedLM"):
        pytest.skip("this transformers has no EuroBERT")
    torch.manual_seed(0)
    config = transformers.AutoConfig.for_model(
        "eurobert",
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
        architectures=["EuroBertForMaskedLM"],
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        mask_token_id=3,
    )
    transformers.EuroBertForMaskedLM(config).save_pretrained(tmp_path / "eurobert")
    reference = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path / "eurobert").eval()
    model, _ = lmpt_model_from(tmp_path / "eurobert", arch="encoder")
    ids = torch.randint(1, VOCAB, (2, 30), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        ours = model.body(ids) @ model.head_weight.t()
        torch.testing.assert_close(ours, reference(ids).logits, atol=1e-5, rtol=1e-5)


def test_explicit_width_that_does_not_fit_names_the_first_tensor(tmp_path: Path) -> None:
    hf_dir = save_llama(tmp_path / "llama", 2)
    with pytest.raises(LmptError, match=r"model\.embed_tokens\.weight has shape \[300, 64\].*needs \[300, 128\]"):
        lmpt_model_from(hf_dir, d_model=128)


def test_untied_head_and_scaled_rope_are_refused(tmp_path: Path) -> None:
    untied = save_llama(tmp_path / "untied", 2, tie_word_embeddings=False)
    with pytest.raises(LmptError, match="untied output head"):
        read_origin(str(untied))
    scaled = save_llama(tmp_path / "scaled", 2, rope_scaling={"rope_type": "linear", "factor": 2.0})
    with pytest.raises(LmptError, match="has rope_type linear"):
        read_origin(str(scaled))


def test_vocabulary_that_does_not_fit_names_the_embedding(tmp_path: Path) -> None:
    origin = read_origin(str(save_llama(tmp_path / "llama", 2)))
    cfg = OmegaConf.create({"model": ModelConfig(name="tiny"), "tokenizer": TokenizerConfig()})
    cfg = adopt_origin(cfg, origin, set())
    model = build_model(cfg.model, "decoder", 1024, pad_id=0)  # a tokenizer of 1024 pieces, not the model's 300
    with pytest.raises(LmptError, match=r"model\.embed_tokens\.weight has shape \[300, 64\].*needs \[1024, 64\]"):
        load_origin(model, origin)


def save_word_tokenizer(directory: Path, tokens: list[str]) -> None:
    """A tokenizer.json beside the model: one token per id."""
    from tokenizers import Tokenizer, models

    Tokenizer(models.WordLevel({t: i for i, t in enumerate(tokens)}, unk_token=tokens[0])).save(
        str(directory / "tokenizer.json")
    )


def test_a_tokenizer_that_extends_the_models_keeps_its_rows(tmp_path: Path) -> None:
    """The model's own tokenizer with tokens added after its vocabulary (lmpt's reserved roles, padding):
    the source's rows are copied, the added ones keep their fresh initialisation."""
    hf_dir = save_llama(tmp_path / "llama", 2)
    tokens = [f"tok{i}" for i in range(VOCAB)]
    save_word_tokenizer(hf_dir, tokens)
    origin = read_origin(str(hf_dir))
    cfg = OmegaConf.create({"model": ModelConfig(name="tiny"), "tokenizer": TokenizerConfig()})
    cfg = adopt_origin(cfg, origin, set())
    extended = SimpleNamespace(vocab_size=VOCAB + 20, id_to_piece=lambda i: (tokens + ["<mask>"] * 20)[i])
    check_tokenizer(origin, extended)
    model = build_model(cfg.model, "decoder", VOCAB + 20, pad_id=0)
    fresh = model.head_weight[VOCAB:].detach().clone()
    load_origin(model, origin)
    assert torch.equal(model.head_weight[:VOCAB], origin.state["model.embed_tokens.weight"])
    assert torch.equal(model.head_weight[VOCAB:], fresh)

    other = SimpleNamespace(vocab_size=VOCAB, id_to_piece=lambda i: "x" if i == 7 else tokens[i])
    with pytest.raises(LmptError, match="gives id 7 to 'x'.*'tok7'.*tokenizer=hf tokenizer.path="):
        check_tokenizer(read_origin(str(hf_dir)), other)


def test_pickled_weights_are_never_read(tmp_path: Path) -> None:
    hf_dir = save_llama(tmp_path / "llama", 2)
    (hf_dir / "model.safetensors").rename(hf_dir / "pytorch_model.bin")
    with pytest.raises(LmptError, match="holds no model.safetensors: lmpt reads safetensors weights only"):
        read_origin(str(hf_dir))
