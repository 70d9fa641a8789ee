"""mdlm: masking times and masks, the 1/t-weighted bound, its exact-count yardstick form, settings refused."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from omegaconf import OmegaConf
from runner import SMALL, run_lmpt

from lmpt.batch import IGNORE, Batch
from lmpt.config.schema import ModelConfig
from lmpt.data.sampler import Windows
from lmpt.errors import LmptError
from lmpt.objectives.mdlm import MaskedDiffusion, MdlmConfig, masking_times
from lmpt.objectives.registry import OBJECTIVES, build_objective
from lmpt.rng import generator
from tests.objectives.objective_helpers import FakeTokenizer

TOK = FakeTokenizer(vocab_size=200)


def mdlm(seq_len: int = 16, **settings) -> MaskedDiffusion:
    cfg = OmegaConf.merge(OmegaConf.structured(MdlmConfig), settings)
    return build_objective(cfg, TOK, seq_len, "auto")  # type: ignore[return-value]


def token_windows(rows: int, length: int, seed: int = 0) -> Windows:
    first = TOK.special.first_ordinary
    tokens = torch.randint(first, TOK.vocab_size, (rows, length), generator=generator(seed, "tokens"))
    return Windows(tokens=tokens, starts=torch.arange(rows), corpus=None)  # type: ignore[arg-type]


def test_registry_finds_mdlm_as_an_encoder_objective():
    assert OBJECTIVES["mdlm"] is MaskedDiffusion
    assert mdlm().arch == "encoder"
    assert MaskedDiffusion.export_refusal and MaskedDiffusion.likelihood == "bound"


def test_each_row_masks_with_its_own_time_and_pad_is_never_masked():
    objective = mdlm(seq_len=400)
    windows = token_windows(8, 401)
    windows.tokens[0, 300:] = TOK.special.pad
    batch = objective.make_batch(windows, generator(1, "objective", 0))
    t = batch.mask_rate
    assert t.shape == (8,) and bool(((t > 1e-3) & (t <= 1.0)).all())
    masked = batch.labels != IGNORE
    assert bool((batch.input_ids[masked] == TOK.special.mask).all())
    assert bool((batch.labels[masked] == windows.tokens[:, 1:][masked]).all())  # the window's first token dropped
    assert not bool(masked[0, 299:].any())  # padding never masked
    for row in range(1, 8):  # each row's masked share within 5 sigma of its t
        n, p = 400, float(t[row])
        assert abs(int(masked[row].sum()) - n * p) <= 5 * math.sqrt(n * p * (1 - p)) + 1


def test_low_discrepancy_puts_one_time_in_each_slice():
    t = masking_times(10, generator(3, "t"), 1e-3, low_discrepancy=True)
    u = 1.0 - (t - 1e-3) / (1 - 1e-3)  # back to the uniform draw
    assert sorted(int(x * 10) for x in u) == list(range(10))


def test_same_generator_same_batch_bit_for_bit():
    objective, windows = mdlm(), token_windows(4, 17)
    a = objective.make_batch(windows, generator(7, "objective", 3, 0, 0))
    b = objective.make_batch(windows, generator(7, "objective", 3, 0, 0))
    assert torch.equal(a.input_ids, b.input_ids) and torch.equal(a.mask_rate, b.mask_rate)


def test_loss_is_masked_cross_entropy_over_t_per_token_of_the_sequence():
    objective = mdlm(seq_len=6)
    windows = token_windows(2, 7)
    batch = objective.make_batch(windows, generator(0, "objective", 1))
    model = objective.build_model(ModelConfig(d_model=16, n_layers=1, n_heads=2, ffn_dim=32, max_seq_len=8), 256)
    out = model(batch)
    loss, stats = objective.loss(out, batch)
    t = batch.mask_rate[out.token_rows]
    assert torch.allclose(loss, (out.token_loss / t).sum() / 12)
    assert float(stats["loss"][1]) == 12


@pytest.mark.parametrize(("setting", "value"), [("eps", 0.0), ("eps", 1.5), ("eps", -0.1), ("eval_draws", 1)])
def test_bad_settings_are_one_line(setting, value):
    with pytest.raises(LmptError, match=f"objective.{setting}="):
        mdlm(**{setting: value})


def test_a_decoder_is_refused():
    cfg = OmegaConf.structured(MdlmConfig)
    with pytest.raises(LmptError, match="cannot train a decoder"):
        build_objective(cfg, TOK, 16, "decoder")


def test_the_head_never_predicts_mask():
    objective = mdlm(seq_len=6)
    model = objective.build_model(ModelConfig(d_model=16, n_layers=1, n_heads=2, ffn_dim=32, max_seq_len=8), 256)
    hidden, weight = torch.randn(3, 16), model.head_weight
    targets = torch.tensor([TOK.special.first_ordinary] * 3)
    loss, _ = model.loss_of_rows(hidden, weight, targets)
    logits = (hidden @ weight.t()).float()
    logits[:, TOK.special.mask] = -math.inf
    logits[:, TOK.vocab_size :] = -math.inf
    assert torch.allclose(loss, torch.nn.functional.cross_entropy(logits, targets, reduction="none"))


@torch.no_grad()
def test_training_and_yardstick_estimate_the_same_bound():
    """On a 6-token window the bound is a finite sum over every set of masked positions: sum over k of 1/k x the mean
    over k-sets of their cross-entropy, per token. Both estimators (times with 1/t, exact counts with n/k) hit it."""
    torch.manual_seed(0)
    objective = mdlm(seq_len=6, eps=1e-4, low_discrepancy=False)
    model = objective.build_model(ModelConfig(d_model=16, n_layers=1, n_heads=2, ffn_dim=32, max_seq_len=8), 256)
    model.eval()
    window = token_windows(1, 7)
    tokens, n = window.tokens[:, 1:], 6

    def cost(positions: tuple[int, ...]) -> float:
        inputs, labels = tokens.clone(), torch.full_like(tokens, IGNORE)
        inputs[0, list(positions)] = TOK.special.mask
        labels[0, list(positions)] = tokens[0, list(positions)]
        return float(model(Batch(input_ids=inputs, labels=labels, attention="bidirectional")).token_loss.sum())

    costs = {s: cost(s) for k in range(1, n + 1) for s in itertools.combinations(range(n), k)}
    exact = (
        sum(sum(costs[s] for s in itertools.combinations(range(n), k)) / math.comb(n, k) / k for k in range(1, n + 1))
        / n
    )

    def estimate(make) -> float:
        total = 0.0
        draws = 4000
        rows = token_windows(1, 7)
        rows.tokens[:] = window.tokens
        for d in range(draws):
            batch = make(rows, generator(d, "mc"))
            key = tuple(int(i) for i in (batch.labels[0] != IGNORE).nonzero()[:, 0])
            total += (costs[key] if key else 0.0) / float(batch.mask_rate[0]) / n
        return total / draws

    assert estimate(objective.yardstick_batch) == pytest.approx(exact, rel=0.03)
    assert estimate(objective.make_batch) == pytest.approx(exact, rel=0.05)


def test_a_compiled_model_still_never_predicts_mask():
    objective = mdlm(seq_len=6)
    cfg = ModelConfig(d_model=16, n_layers=1, n_heads=2, ffn_dim=32, max_seq_len=8)
    torch.manual_seed(0)
    model = objective.build_model(cfg, 256).eval()
    batch = objective.make_batch(token_windows(2, 7), generator(0, "objective", 1))
    with torch.no_grad():
        plain = model(batch).token_loss
        model.compile_parts(backend="eager")
        compiled = model(batch).token_loss
    assert torch.allclose(plain, compiled)


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        (["objective.eps=0"], "objective.eps=0 must be in (0, 1]"),
        (["objective.eps=1.5"], "objective.eps=1.5 must be in (0, 1]"),
        (["model.arch=decoder"], "objective mdlm cannot train a decoder"),
    ],
)
def test_a_launch_with_bad_settings_is_one_line_exit_2_nothing_written(tmp_path, overrides, fragment):
    args = [*SMALL, "objective=mdlm", *overrides, f"hydra.run.dir={tmp_path / 'run'}"]
    done = run_lmpt(*args, cwd=tmp_path)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith("lmpt: error:"), done.stderr
    assert fragment in lines[0] and list(tmp_path.iterdir()) == []
