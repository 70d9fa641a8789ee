"""The likelihood yardstick: held-out bits per token, exact for clm, for mdlm the bound over fixed passes of masks
(the same in every run) with its standard error; val_bpb counts every text token of an mdlm window."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from lmpt.config.schema import ModelConfig
from lmpt.data.sampler import ValidationWindows
from lmpt.objectives.clm import ClmConfig
from lmpt.objectives.mdlm import MdlmConfig
from lmpt.objectives.registry import build_objective
from lmpt.objectives.yardstick import bound_bits_per_token, draw_groups, exact_bits_per_token
from lmpt.train.batches import validation_batches, yardstick_batches
from lmpt.train.distributed import Distributed
from lmpt.train.evaluation import Evaluator
from lmpt.train.metrics import held_out_sizes
from lmpt.train.precision import Precision
from tests.objectives.objective_helpers import FakeTokenizer, fake_corpus

TOK = FakeTokenizer(vocab_size=200)
MODEL = ModelConfig(d_model=16, n_layers=1, n_heads=2, ffn_dim=32, max_seq_len=16)


def objective(cfg):
    return build_objective(OmegaConf.merge(OmegaConf.structured(type(cfg)), cfg), TOK, 12, "auto")


def held_out() -> dict[str, ValidationWindows]:
    rng = np.random.default_rng(0)
    docs = [[list(rng.integers(TOK.special.first_ordinary, 200, size=30))] for _ in range(10)]
    return {"": ValidationWindows(fake_corpus(docs, eos=TOK.special.eos), 13, batch_size=4, n_batches=2)}


def test_the_bound_draws_are_the_same_in_every_run_and_pass_by_pass() -> None:
    a = objective(MdlmConfig(eval_draws=3))
    b = objective(MdlmConfig(eval_draws=3, eps=0.5, low_discrepancy=False))  # other settings, same yardstick
    sets = held_out()
    first, second = yardstick_batches(sets, a, 2), yardstick_batches(sets, b, 2)
    assert len(first) == 6 and len(draw_groups(first, 3)) == 3
    for x, y in zip(first, second, strict=True):
        assert torch.equal(x.input_ids, y.input_ids) and torch.equal(x.mask_rate, y.mask_rate)
    assert not torch.equal(first[0].input_ids, first[2].input_ids)  # each pass masks anew
    # exact counts: each row masks k of its tokens, weighed by n / k
    for batch in first:
        counts = (batch.labels != -100).sum(dim=1).float()
        assert torch.allclose(batch.mask_rate, counts / 12) and bool((counts >= 1).all())


def test_bound_and_exact_figures_in_bits() -> None:
    figure = bound_bits_per_token([math.log(2) * x for x in (5.0, 5.2, 5.4, 5.6)])
    assert figure["val_bits_per_token"] == pytest.approx(5.3)
    assert figure["val_bits_per_token_stderr"] == pytest.approx(np.std([5.0, 5.2, 5.4, 5.6], ddof=1) / 2)
    assert exact_bits_per_token(math.log(2) * 4.0) == {"val_bits_per_token": 4.0, "val_bits_per_token_stderr": 0.0}


@pytest.mark.parametrize("cfg", [ClmConfig(), MdlmConfig(eval_draws=4)], ids=["clm", "mdlm"])
def test_the_evaluator_logs_bits_per_token(cfg) -> None:
    torch.manual_seed(0)
    obj = objective(cfg)
    model = obj.build_model(MODEL, 256)
    sets = held_out()
    evaluate = Evaluator(model, model, obj, Precision("fp32", torch.device("cpu")), Distributed())
    record = evaluate(validation_batches(sets, obj, 0, 2), yardstick_batches(sets, obj, 2))
    if cfg.name == "clm":
        assert record["val_bits_per_token"] == pytest.approx(record["val_loss"] / math.log(2))
        assert record["val_bits_per_token_stderr"] == 0.0
    else:
        assert record["val_bits_per_token_stderr"] > 0
        assert abs(record["val_bits_per_token"] - record["val_loss"] / math.log(2)) < 3.0  # one bound, two estimates


def test_val_bpb_of_mdlm_counts_every_text_token() -> None:
    obj = objective(MdlmConfig())
    batches = validation_batches(held_out(), obj, 0, 2)
    sizes = torch.ones(256, dtype=torch.long)
    tokens, _ = held_out_sizes(batches, sizes, obj.scored_tokens)[""]
    assert tokens == 2 * 4 * 12  # masked or not, every token of each window's text
    assert held_out_sizes(batches, sizes)[""][0] < tokens  # the masked positions alone
