"""Sampling at the edges (issue 32): a temperature so small that logits / temperature overflow samples the most
likely token (every sampler shares `pick_token`), a temperature that is not a finite number is one line, and
lmpt-fill keeps the space a middle starts with."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from lmpt.config.schema import ModelConfig
from lmpt.errors import LmptError
from lmpt.inference import infill as infill_module
from lmpt.inference.infill import infill
from lmpt.inference.progress import WorkBar
from lmpt.model import build_model
from lmpt.model.generate import pick_token, sample
from lmpt.rundir.trained import Trained

CFG = ModelConfig(name="test", d_model=32, n_layers=1, n_heads=2, ffn_dim=64, max_seq_len=32)


def _decoder(vocab_size: int = 200) -> torch.nn.Module:
    torch.manual_seed(0)
    return build_model(CFG, "decoder", vocab_size=vocab_size, pad_id=0).eval()


@pytest.mark.parametrize("temperature", [1e-300, 5e-324, 1e-40])
def test_a_tiny_temperature_samples_the_most_likely_token(temperature: float) -> None:
    logits = torch.tensor([1.0, 3.0, 2.9, float("-inf")])
    for top_k, top_p in ((None, None), (2, None), (None, 0.9)):
        assert pick_token(logits, temperature, top_k, top_p, torch.Generator().manual_seed(0)) == 1
    model = _decoder()
    greedy = sample(model, [2, 11, 12], 6, temperature=0)
    assert (
        sample(
            model, [2, 11, 12], 6, temperature=temperature, generator=torch.Generator().manual_seed(0), vocab_size=150
        )
        == greedy
    )


@pytest.mark.parametrize("temperature", [math.inf, math.nan])
def test_a_temperature_that_is_not_finite_is_one_line(temperature: float) -> None:
    with pytest.raises(LmptError, match="temperature=.* must be a finite number") as info:
        pick_token(torch.tensor([1.0, 2.0]), temperature, None, None, None)
    assert "\n" not in str(info.value)


def test_fill_keeps_the_space_the_middle_starts_with(shakespeare, monkeypatch) -> None:
    tok = shakespeare.tokenizer
    trained = Trained(_decoder(tok.vocab_size), tok, None, "decoder", "fim", Path("model.safetensors"))  # type: ignore[arg-type]
    middle = tok.encode("To be or not to be that is")[len(tok.encode("To be or not to be")) :]
    monkeypatch.setattr(infill_module, "sample", lambda *args, **kwargs: middle)
    with WorkBar("fill", hidden=True) as bar:
        out = infill(trained, "To be or not to be", " the question", 4, 1.0, 0, bar)
    assert out["middle"] == " that is" and out["text"] == "To be or not to be that is the question"


def test_fill_samples_at_a_tiny_temperature(shakespeare) -> None:
    tok = shakespeare.tokenizer
    trained = Trained(_decoder(tok.vocab_size), tok, None, "decoder", "fim", Path("model.safetensors"))  # type: ignore[arg-type]
    with WorkBar("fill", hidden=True) as bar:
        bar.start(4)
        out = infill(trained, "To be", "question", 4, 1e-300, 0, bar)
    assert out["tokens"] <= 4 and out["text"].startswith("To be")
