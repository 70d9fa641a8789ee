"""Each objective owns how its held-out text is measured (lmpt.objectives.measure): fim's yardstick is the
left-to-right likelihood of the plain windows clm reads (the same number with the same weights) with the paper's FIM
loss beside it; mtp's is its main head's alone; fim at rate 0 is clm batch for batch."""

from __future__ import annotations

import math

import pytest
import torch
from objective_helpers import batches

from lmpt.batch import IGNORE
from lmpt.config.schema import ModelConfig
from lmpt.data.sampling import validation_sets
from lmpt.errors import LmptError
from lmpt.objectives.clm import ClmConfig
from lmpt.objectives.fim import FimConfig, split_documents
from lmpt.objectives.measure import FimLikelihood, NextTokenLikelihood
from lmpt.objectives.mtp import MtpConfig
from lmpt.objectives.registry import OBJECTIVES, build_objective
from lmpt.objectives.yardstick import yardstick_generator
from lmpt.train.batches import validation_batches, yardstick_batches
from lmpt.train.distributed import Distributed
from lmpt.train.evaluation import Evaluator
from lmpt.train.precision import Precision

SEQ_LEN = 64
MODEL = ModelConfig(d_model=32, n_layers=1, n_heads=2, ffn_dim=64, max_seq_len=SEQ_LEN)


def evaluate(objective, model, data) -> dict:
    sets = validation_sets(data, objective.window_length, 8, 2)
    evaluator = Evaluator(model, model, objective, Precision("fp32", torch.device("cpu")), Distributed())
    with torch.no_grad():
        return evaluator(validation_batches(sets, objective, 7, 2), yardstick_batches(sets, objective, 2))


def test_every_objective_names_its_measure_and_likelihood_follows_it() -> None:
    measures = {name: cls.measure_class.__name__ for name, cls in OBJECTIVES.items()}
    assert measures["fim"] == "FimLikelihood" and measures["mdlm"] == "DiffusionBound"
    assert {name for name, cls in OBJECTIVES.items() if cls.likelihood == "exact"} == {"clm", "mtp", "fim"}
    assert [name for name, cls in OBJECTIVES.items() if cls.likelihood == "bound"] == ["mdlm"]
    assert issubclass(FimLikelihood, NextTokenLikelihood)


def test_fims_yardstick_is_clms_on_the_same_weights_and_its_fim_loss_is_reported_beside_it(shakespeare) -> None:
    clm = build_objective(ClmConfig(), shakespeare.tokenizer, SEQ_LEN, "auto")
    fim = build_objective(FimConfig(), shakespeare.tokenizer, SEQ_LEN, "auto")
    torch.manual_seed(0)
    model = clm.build_model(MODEL, 1024)
    ours, theirs = evaluate(fim, model, shakespeare), evaluate(clm, model, shakespeare)
    assert ours["val_bits_per_token"] == theirs["val_bits_per_token"]  # the same windows, tokens and weights
    assert ours["val_loss"] == theirs["val_loss"] and ours["val_acc"] == theirs["val_acc"]
    assert ours["val_bits_per_token"] == pytest.approx(ours["val_loss"] / math.log(2))
    assert {"val_fim_psm_loss", "val_fim_spm_loss", "val_fim_loss"} <= set(ours)
    assert ours["val_fim_loss"] == pytest.approx((ours["val_fim_psm_loss"] + ours["val_fim_spm_loss"]) / 2)
    assert not any(key.startswith("val_fim") for key in theirs)
    # the same held-out windows rearranged the same way whatever the run's rates: fim at rate 0 (clm's control)
    control = build_objective(FimConfig(fim_rate=0.0), shakespeare.tokenizer, SEQ_LEN, "auto")
    assert evaluate(control, model, shakespeare) == ours


def test_the_fim_loss_is_on_each_middle_split_at_the_same_points_in_psm_and_spm(shakespeare) -> None:
    fim = build_objective(FimConfig(), shakespeare.tokenizer, SEQ_LEN, "auto")
    (windows,) = validation_sets(shakespeare, fim.window_length, 8, 1).values()
    psm = fim.probe_batch(windows.batch(0), yardstick_generator("", 0), spm=False)
    spm = fim.probe_batch(windows.batch(0), yardstick_generator("", 0), spm=True)
    pre, suf, mid = fim.sentinels
    eos = fim.special.eos
    for batch in (psm, spm):
        scored = batch.labels != IGNORE
        assert scored.any() and not torch.isin(batch.labels[scored], torch.tensor([pre, suf, mid])).any()
    # every complete document: its middle is what follows <MID> in PSM and what ends the document in SPM alike
    for row_psm, row_spm in zip(psm.input_ids.tolist(), spm.input_ids.tolist(), strict=True):
        for (a, ended_a), (b, ended_b) in zip(
            split_documents(row_psm, eos), split_documents(row_spm, eos), strict=False
        ):
            if ended_a and ended_b and mid in a:
                middle = a[a.index(mid) + 1 :]
                assert b[len(b) - len(middle) :] == middle


def test_fim_at_rate_zero_makes_clms_batches(shakespeare) -> None:
    clm = build_objective(ClmConfig(), shakespeare.tokenizer, SEQ_LEN, "auto")
    control = build_objective(FimConfig(fim_rate=0.0), shakespeare.tokenizer, SEQ_LEN, "auto")
    for (_, a), (_, b) in zip(
        batches(clm, shakespeare.train, 8, 3), batches(control, shakespeare.train, 8, 3), strict=True
    ):
        assert torch.equal(a.input_ids, b.input_ids) and torch.equal(a.labels, b.labels)


def test_mtps_yardstick_is_its_main_heads_next_token_likelihood_alone(shakespeare) -> None:
    mtp = build_objective(MtpConfig(mtp_depth=2, mtp_weight=1.0), shakespeare.tokenizer, SEQ_LEN, "auto")
    clm = build_objective(ClmConfig(), shakespeare.tokenizer, SEQ_LEN, "auto")
    torch.manual_seed(0)
    model = mtp.build_model(MODEL, 1024)
    trunk = clm.build_model(MODEL, 1024)
    missing, unexpected = trunk.load_state_dict(model.state_dict(), strict=False)
    assert not missing and unexpected  # the modules alone are left out
    ours, theirs = evaluate(mtp, model, shakespeare), evaluate(clm, trunk, shakespeare)
    assert ours["val_bits_per_token"] == pytest.approx(theirs["val_bits_per_token"], abs=1e-6)
    assert ours["val_mtp_loss_1"] != pytest.approx(ours["val_loss"])  # the modules' losses are reported apart


def test_the_objective_says_how_a_run_reads_choices_and_how_it_samples() -> None:
    from lmpt.objectives.base import Reading, Sampling

    readings = {name: cls.reading(cls.natural_arch) for name, cls in OBJECTIVES.items()}
    samplings = {name: cls.sampling(cls.natural_arch) for name, cls in OBJECTIVES.items()}
    assert readings["mdlm"] is Reading.OWN and samplings["mdlm"] is Sampling.UNMASK
    assert readings["clm"] is Reading.CAUSAL and samplings["fim"] is Sampling.CONTINUE
    assert readings["mlm"] is Reading.PSEUDO_LIKELIHOOD and samplings["mlm"] is Sampling.NONE
    assert readings["span"] is Reading.ENCODER_DECODER and samplings["span"] is Sampling.FILL_SPANS
    assert OBJECTIVES["span"].reading("decoder") is Reading.CAUSAL  # span's decoder-only form reads as a decoder


def test_a_tied_choice_counts_wrong_whichever_comes_first() -> None:
    from lmpt.downstream.likelihood import choice_outcomes
    from lmpt.downstream.zero_shot_files import ChoiceQuestion

    questions = [
        ChoiceQuestion("c", ("a", "b"), 0),
        ChoiceQuestion("c", ("a", "b"), 1),
        ChoiceQuestion("c", ("a", "b"), 0),
    ]
    right, right_norm = choice_outcomes(questions, [[-1.0, -1.0], [-1.0, -1.0], [-0.5, -1.0]])
    assert right == [False, False, True] and right_norm == [False, False, True]


def test_regularised_clm_corrupts_training_inputs_alone_and_is_measured_on_clean_text(shakespeare) -> None:
    """objective.input_mask_prob (Ni et al. 2025's control): a share of the inputs become [MASK], every target stays
    the clean next token, and the held-out figures read the text plain clm reads."""
    tokenizer = shakespeare.tokenizer
    plain = build_objective(ClmConfig(), tokenizer, SEQ_LEN, "auto")
    masked = build_objective(ClmConfig(input_mask_prob=0.3), tokenizer, SEQ_LEN, "auto")
    mask, pad = tokenizer.special.mask, tokenizer.special.pad
    hidden = total = 0
    for (_, a), (_, b) in zip(
        batches(plain, shakespeare.train, 8, 3), batches(masked, shakespeare.train, 8, 3), strict=True
    ):
        assert torch.equal(a.labels, b.labels)  # the targets: the clean next tokens
        changed = a.input_ids != b.input_ids
        assert (b.input_ids[changed] == mask).all() and not (a.input_ids[changed] == pad).any()
        hidden, total = hidden + int(changed.sum()), total + int((a.input_ids != pad).sum())
    assert 0.25 < hidden / total < 0.35
    torch.manual_seed(0)
    model = plain.build_model(MODEL, 1024)
    assert evaluate(masked, model, shakespeare) == evaluate(plain, model, shakespeare)
    with pytest.raises(LmptError, match=r"objective.input_mask_prob=1 must be in \[0, 1\)"):
        build_objective(ClmConfig(input_mask_prob=1.0), tokenizer, SEQ_LEN, "auto")
