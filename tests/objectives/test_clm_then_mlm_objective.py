"""clm-then-mlm (Gisserot-Boukhlef et al. 2025): clm batches before the switch, mlm batches after it, the switch at
its share of the run's steps; one stack whose weights are read back as the encoder the run ends as."""

from __future__ import annotations

import pytest
import torch
from objective_helpers import assert_same_batch, five_sigma, windows
from omegaconf import OmegaConf

from lmpt.batch import IGNORE
from lmpt.config.schema import ModelConfig
from lmpt.errors import LmptError
from lmpt.model.build import build_model
from lmpt.objectives.clm import ClmConfig
from lmpt.objectives.clm_then_mlm import ClmThenMlmConfig
from lmpt.objectives.mlm import MlmConfig
from lmpt.objectives.registry import build_objective
from lmpt.rng import generator

SEQ_LEN, MAX_STEPS = 64, 200


def objective(tokenizer, **settings):
    made = build_objective(ClmThenMlmConfig(**settings), tokenizer, SEQ_LEN, "auto")
    made.plan_run(MAX_STEPS)
    return made


@pytest.mark.parametrize("switch_at", [0.25, 0.5, 0.8])
def test_clm_before_the_switch_mlm_after(shakespeare, switch_at: float) -> None:
    tokenizer = shakespeare.tokenizer
    both = objective(tokenizer, switch_at=switch_at)
    clm = build_objective(ClmConfig(), tokenizer, SEQ_LEN, "auto")
    mlm = build_objective(MlmConfig(), tokenizer, SEQ_LEN, "auto")
    switch = round(switch_at * MAX_STEPS)
    assert both.switch_step == switch
    for step in (0, switch - 1, switch, MAX_STEPS - 1):
        w = windows(shakespeare.train, both.window_length, 8, step)
        gen = lambda step=step: generator(0, "objective", step, 0, 0)
        batch = both.batch_at(w, gen(), step)
        if step < switch:  # clm's batch exactly: causal attention, labels shifted once
            assert_same_batch(batch, clm.make_batch(w, gen()))
            assert batch.attention == "causal" and torch.equal(batch.labels, w.tokens[:, 1:])
        else:  # mlm's batch exactly, on the window's first seq_len tokens
            trimmed = type(w)(w.tokens[:, :SEQ_LEN], w.starts, w.corpus)
            assert_same_batch(batch, mlm.make_batch(trimmed, gen()))
            assert batch.attention == "bidirectional"


def test_mlm_phase_selects_at_mask_prob(shakespeare) -> None:
    both = objective(shakespeare.tokenizer, switch_at=0.5, mask_prob=0.3)
    selected = eligible = 0
    for step in range(150, 170):
        w = windows(shakespeare.train, both.window_length, 16, step)
        batch = both.batch_at(w, generator(0, "objective", step, 0, 0), step)
        selected += int((batch.labels != IGNORE).sum())
        eligible += int((w.tokens[:, :SEQ_LEN] >= both.special.first_ordinary).sum())
    assert abs(selected - 0.3 * eligible) < five_sigma(eligible, 0.3)


def test_held_out_batches_are_the_mlm_the_run_ends_on(shakespeare) -> None:
    both = objective(shakespeare.tokenizer)
    w = windows(shakespeare.train, both.window_length, 4, 0)
    assert both.make_batch(w, generator(0, "validation", 0)).attention == "bidirectional"
    assert both.expected_loss_fraction == pytest.approx(0.5 + 0.5 * 0.15)


def test_one_stack_trained_as_a_decoder_is_read_back_as_an_encoder(shakespeare) -> None:
    both = objective(shakespeare.tokenizer)
    assert both.arch == "encoder"  # the saved model, lmpt-eval and lmpt-export see an encoder
    cfg = OmegaConf.structured(ModelConfig(d_model=32, n_layers=1, n_heads=2, ffn_dim=64, max_seq_len=SEQ_LEN))
    trained = both.build_model(cfg, 1024)
    assert trained.arch == "decoder"  # honours each batch's attention
    encoder = build_model(cfg, "encoder", 1024, both.special.pad)
    encoder.load_state_dict(trained.state_dict(), strict=True)


def test_settings_are_refused_with_the_key(shakespeare) -> None:
    with pytest.raises(LmptError, match=r"objective.switch_at=1.5 must be in \[0, 1\]"):
        build_objective(ClmThenMlmConfig(switch_at=1.5), shakespeare.tokenizer, SEQ_LEN, "auto")
    with pytest.raises(LmptError, match="objective clm-then-mlm cannot train a decoder"):
        build_objective(ClmThenMlmConfig(), shakespeare.tokenizer, SEQ_LEN, "decoder")
