"""build_objective: name -> class, architecture resolution and the start-up refusals."""

from __future__ import annotations

import pytest
from objective_helpers import FakeTokenizer

from lmpt.errors import LmptError
from lmpt.objectives.clm import ClmConfig
from lmpt.objectives.electra import ElectraConfig
from lmpt.objectives.fim import FimConfig
from lmpt.objectives.mdlm import MdlmConfig
from lmpt.objectives.mlm import MlmConfig
from lmpt.objectives.mtp import MtpConfig
from lmpt.objectives.nsp import NspConfig
from lmpt.objectives.prefix import PrefixConfig
from lmpt.objectives.registry import OBJECTIVES, build_objective
from lmpt.objectives.span import SpanConfig
from lmpt.objectives.ul2 import DenoiserConfig, Ul2Config

TOKENIZER = FakeTokenizer(vocab_size=1024, num_sentinels=100)
NATURAL = [
    (ClmConfig(), "decoder"),
    (MlmConfig(), "encoder"),
    (NspConfig(), "encoder"),
    (ElectraConfig(), "encoder"),
    (SpanConfig(), "encoder-decoder"),
    (PrefixConfig(), "decoder"),
    (Ul2Config(), "encoder-decoder"),
    (MtpConfig(), "decoder"),
    (FimConfig(), "decoder"),
    (MdlmConfig(), "encoder"),
]


def test_every_objective_is_registered() -> None:
    assert set(OBJECTIVES) == {
        "clm",
        "mlm",
        "nsp",
        "electra",
        "span",
        "prefix",
        "ul2-mixture",
        "mtp",
        "fim",
        "clm-then-mlm",
        "gpt-bert",
        "mdlm",
    }


@pytest.mark.parametrize("cfg, natural", NATURAL, ids=[c.name for c, _ in NATURAL])
def test_auto_picks_the_natural_architecture(cfg, natural: str) -> None:
    objective = build_objective(cfg, TOKENIZER, 128, "auto")
    assert objective.arch == natural == type(objective).natural_arch
    assert objective.describe_attention()


@pytest.mark.parametrize(
    "cfg, arch",
    [(ClmConfig(), "decoder"), (SpanConfig(), "decoder"), (Ul2Config(), "decoder"), (MlmConfig(), "encoder")],
    ids=lambda x: x if isinstance(x, str) else x.name,
)
def test_an_explicit_supported_architecture_is_used(cfg, arch) -> None:
    assert build_objective(cfg, TOKENIZER, 128, arch).arch == arch


def test_clm_on_an_encoder_is_refused_in_one_line() -> None:
    with pytest.raises(LmptError) as err:
        build_objective(ClmConfig(), TOKENIZER, 128, "encoder")
    assert (
        str(err.value) == "objective clm cannot train an encoder (model.arch=encoder): use model.arch=auto or decoder"
    )


@pytest.mark.parametrize(
    "cfg, arch",
    [(MlmConfig(), "decoder"), (NspConfig(), "encoder-decoder"), (PrefixConfig(), "encoder"), (Ul2Config(), "encoder")],
    ids=lambda x: x if isinstance(x, str) else x.name,
)
def test_unsupported_architectures_are_refused(cfg, arch) -> None:
    with pytest.raises(LmptError, match=f"cannot train .*model.arch={arch}"):
        build_objective(cfg, TOKENIZER, 128, arch)


def test_unknown_names_are_refused() -> None:
    with pytest.raises(LmptError, match="objective=bert is unknown"):
        build_objective(ClmConfig(name="bert"), TOKENIZER, 128, "auto")
    with pytest.raises(LmptError, match="model.arch=rnn is unknown"):
        build_objective(ClmConfig(), TOKENIZER, 128, "rnn")


@pytest.mark.parametrize("mask_prob", [0.05, 0.15, 0.4])
def test_the_mask_prob_sweep_just_works(mask_prob: float) -> None:
    assert build_objective(MlmConfig(mask_prob=mask_prob), TOKENIZER, 128, "auto").cfg.mask_prob == mask_prob


@pytest.mark.parametrize(
    "cfg, key",
    [
        (MlmConfig(mask_prob=0.0), "objective.mask_prob"),
        (MlmConfig(mask_prob=1.0), "objective.mask_prob"),
        (NspConfig(mask_prob=1.5), "objective.mask_prob"),
        (MlmConfig(mask_token_frac=-0.1), "objective.mask_token_frac"),
        (MlmConfig(random_token_frac=1.2), "objective.random_token_frac"),
        (MlmConfig(mask_token_frac=0.9, random_token_frac=0.2), "objective.mask_token_frac"),
        (NspConfig(variant="xyz"), "objective.variant"),
        (NspConfig(random_pair_prob=1.1), "objective.random_pair_prob"),
        (NspConfig(mlm_weight=-1.0), "objective.mlm_weight"),
        (SpanConfig(noise_density=0.0), "objective.noise_density"),
        (SpanConfig(noise_density=1.0), "objective.noise_density"),
        (SpanConfig(mean_span_length=0.5), "objective.mean_span_length"),
        (PrefixConfig(split_min=0.6, split_max=0.4), "objective.split_min"),
        (PrefixConfig(split_min=0.5, split_max=0.5), "objective.split_min"),
        (PrefixConfig(split_max=1.5), "objective.split_max"),
        (Ul2Config(denoisers=[DenoiserConfig(kind="Q")]), "objective.denoisers[0].kind"),
        (Ul2Config(denoisers=[DenoiserConfig(weight=-1.0)]), "objective.denoisers[0].weight"),
        (Ul2Config(denoisers=[DenoiserConfig(weight=0.0)]), "objective.denoisers weights"),
        (Ul2Config(denoisers=[DenoiserConfig(), DenoiserConfig(noise_density=2.0)]), "objective.denoisers[1]"),
        (Ul2Config(denoisers=[DenoiserConfig("X", mean_span_length=0.0)]), "objective.denoisers[0].mean_span_length"),
        (Ul2Config(denoisers=[]), "objective.denoisers"),
    ],
    ids=lambda x: x if isinstance(x, str) else "",
)
def test_bad_values_are_refused_naming_the_key(cfg, key: str) -> None:
    with pytest.raises(LmptError) as err:
        build_objective(cfg, TOKENIZER, 128, "auto")
    assert key in str(err.value) and "\n" not in str(err.value)


def test_more_spans_than_sentinels_is_refused_with_the_numbers() -> None:
    with pytest.raises(LmptError) as err:
        build_objective(SpanConfig(), FakeTokenizer(1024, num_sentinels=20), 512, "auto")
    message = str(err.value)
    assert "data.seq_len=512 makes 28 spans but the tokenizer has 20 sentinels" in message
    assert "tokenizer.num_sentinels" in message


def test_ul2_refuses_a_denoiser_needing_more_sentinels() -> None:
    # X (mu 3, r 0.5) at 512 inputs cuts a 765-token window (511 inputs after the mode token) into 127 spans
    with pytest.raises(LmptError, match=r"X3-0.5 .*makes 127 spans but the tokenizer has 100 sentinels"):
        build_objective(Ul2Config(), TOKENIZER, 512, "auto")
    assert build_objective(Ul2Config(), FakeTokenizer(1024, num_sentinels=127), 512, "auto").window_length > 512


def test_too_many_spans_for_the_clean_tokens_is_refused() -> None:
    with pytest.raises(LmptError, match="clean tokens"):
        build_objective(SpanConfig(noise_density=0.9, mean_span_length=1.0), TOKENIZER, 64, "auto")


def test_model_needs_per_objective() -> None:
    nsp = build_objective(NspConfig(), TOKENIZER, 128, "auto")
    assert (nsp.n_segments, nsp.n_sequence_classes) == (2, 2)
    clm = build_objective(ClmConfig(), TOKENIZER, 128, "auto")
    assert (clm.n_segments, clm.n_sequence_classes, clm.target_length) == (0, 0, 0)
    assert build_objective(SpanConfig(), TOKENIZER, 512, "auto").target_length == 114
    assert build_objective(SpanConfig(), TOKENIZER, 512, "decoder").target_length == 0


def test_a_run_saved_before_a_key_existed_gets_its_default_and_keeps_its_own() -> None:
    """An mdlm run made before objective.score_draws existed still loads for lmpt-eval (its config is completed at
    the key's default); the keys it stored are kept as stored, and an unknown objective is left alone."""
    from omegaconf import OmegaConf

    from lmpt.objectives.registry import with_new_keys

    older = OmegaConf.create({"name": "mdlm", "eps": 0.01, "eval_draws": 16, "document_attention": False})
    completed = with_new_keys(older)
    assert completed.score_draws == 8 and completed.eps == 0.01 and completed.eval_draws == 16
    assert "score_draws" not in older  # the stored config itself is not changed
    foreign = OmegaConf.create({"name": "not-an-objective", "x": 1})
    assert with_new_keys(foreign) is foreign
