"""mtp (DeepSeek-V3 multi-token prediction): module k's targets are the tokens k+1 ahead, never in another
document; the main loss is clm's; the modules share embedding and head and are counted in the FLOPs."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from objective_helpers import FakeTokenizer, assert_same_batch, batches
from omegaconf import OmegaConf

from lmpt.batch import IGNORE
from lmpt.config.schema import ModelConfig
from lmpt.errors import LmptError
from lmpt.model.build import padded_vocab_size
from lmpt.model.language_model import matmul_parameters
from lmpt.objectives.clm import ClmConfig, document_ids
from lmpt.objectives.mtp import MtpConfig, tokens_ahead
from lmpt.objectives.registry import build_objective
from lmpt.preview.render import settings
from lmpt.rng import generator

SEQ_LEN = 64
TINY = ModelConfig(d_model=32, n_layers=2, n_heads=2, ffn_dim=64, max_seq_len=SEQ_LEN)


def test_module_k_targets_are_the_tokens_k_plus_1_ahead(shakespeare) -> None:
    mtp = build_objective(MtpConfig(mtp_depth=3), shakespeare.tokenizer, SEQ_LEN, "auto")
    eos = shakespeare.tokenizer.special.eos
    kept = 0
    for w, batch in batches(mtp, shakespeare.train, batch_size=8, n_steps=4):
        assert batch.mtp_labels.shape == (8, 3, SEQ_LEN) and batch.mtp_labels.dtype == torch.long
        docs = document_ids(w.tokens, eos)
        for k in (1, 2, 3):
            targets = batch.mtp_labels[:, k - 1]
            ahead = w.tokens[:, k + 1 :]  # position t's token k+1 ahead: the main head's next token is 1 ahead
            n = ahead.shape[1]
            same = docs[:, k + 1 :] == docs[:, :n]
            assert torch.equal(targets[:, :n][same], ahead[same])
            assert (targets[:, :n][~same] == IGNORE).all() and (targets[:, n:] == IGNORE).all()
            kept += int(same.sum())
            if k == 1:  # module 1's target is the main head's target one position later
                assert torch.equal(targets[:, :n][same], batch.labels[:, 1 : n + 1][same])
    assert kept > 0


def test_no_module_predicts_across_a_document_boundary() -> None:
    """eos (3) ends its document: a module may predict it, never a token of the next document."""
    tokens = torch.tensor([[10, 11, 12, 3, 20, 21, 22, 23, 3, 30]])
    targets = tokens_ahead(tokens, depth=2, eos=3, pad=0)
    assert targets[0, 0].tolist() == [12, 3, IGNORE, IGNORE, 22, 23, 3, IGNORE, IGNORE]  # 2 ahead
    assert targets[0, 1].tolist() == [3, IGNORE, IGNORE, IGNORE, 23, 3, IGNORE, IGNORE, IGNORE]  # 3 ahead
    padded = tokens_ahead(torch.tensor([[10, 11, 12, 0, 0]]), 1, eos=3, pad=0)
    assert padded[0, 0].tolist() == [12, IGNORE, IGNORE, IGNORE]  # padding is never a target


def test_the_main_batch_is_clm_and_depth_zero_is_plain_clm(shakespeare) -> None:
    clm = build_objective(ClmConfig(), shakespeare.tokenizer, SEQ_LEN, "auto")
    plain = build_objective(MtpConfig(mtp_depth=0), shakespeare.tokenizer, SEQ_LEN, "auto")
    mtp = build_objective(MtpConfig(mtp_depth=2), shakespeare.tokenizer, SEQ_LEN, "auto")
    for (w, ours), (_, theirs) in zip(
        batches(mtp, shakespeare.train, 4, 2), batches(clm, shakespeare.train, 4, 2), strict=True
    ):
        assert torch.equal(ours.input_ids, theirs.input_ids) and torch.equal(ours.labels, theirs.labels)
        assert_same_batch(plain.make_batch(w, generator(0)), theirs)
    assert plain.build_model(TINY, 128).mtp is None


def _model_and_batch(shakespeare, depth: int):
    mtp = build_objective(MtpConfig(mtp_depth=depth), shakespeare.tokenizer, SEQ_LEN, "auto")
    torch.manual_seed(0)
    model = mtp.build_model(TINY, padded_vocab_size(shakespeare.tokenizer.vocab_size))
    _, batch = next(batches(mtp, shakespeare.train, 4, 1))
    return mtp, model, batch


def test_main_loss_reported_is_the_clm_loss_of_the_main_head(shakespeare) -> None:
    mtp, model, batch = _model_and_batch(shakespeare, depth=2)
    clm = build_objective(ClmConfig(), shakespeare.tokenizer, SEQ_LEN, "auto")
    out = model(batch)
    total, stats = mtp.loss(out, batch)
    with torch.no_grad():
        clm_loss, _ = clm.loss(model(replace(batch, mtp_labels=None)), batch)  # the main head alone, as clm scores it
    assert float(stats["loss"][0] / stats["loss"][1]) == pytest.approx(float(clm_loss), rel=1e-6)
    module_means = [float(stats[f"mtp_loss_{k}"][0] / stats[f"mtp_loss_{k}"][1]) for k in (1, 2)]
    assert float(total.detach()) == pytest.approx(float(clm_loss) + 0.3 / 2 * sum(module_means), rel=1e-5)
    assert [int(stats[f"mtp_loss_{k}"][1]) for k in (1, 2)] == [
        int((batch.mtp_labels[:, k] != IGNORE).sum()) for k in (0, 1)
    ]
    total.backward()  # gradients reach every module; the embedding and head are the main model's own
    assert all(p.grad is not None for p in model.mtp.parameters())
    assert not any(isinstance(m, torch.nn.Embedding) for m in model.mtp.modules())


def test_flops_count_each_module_projection_block_and_head(shakespeare) -> None:
    _, model, _ = _model_and_batch(shakespeare, depth=2)
    _, plain, _ = _model_and_batch(shakespeare, depth=0)
    d, vocab = TINY.d_model, model.vocab_size
    block = matmul_parameters(model.mtp.depths[0].block)
    per_depth = 6.0 * (2 * d * d + block) + 12.0 * d * SEQ_LEN + 6.0 * d * vocab
    extra = model.flops_per_example(SEQ_LEN) - plain.flops_per_example(SEQ_LEN)
    assert extra == pytest.approx(SEQ_LEN * 2 * per_depth)
    assert model.num_parameters() - plain.num_parameters() == 2 * (
        2 * d * d + sum(p.numel() for p in model.mtp.depths[0].block.parameters()) + 3 * d
    )


@pytest.mark.parametrize(
    ("settings", "seq_len", "message"),
    [
        ({"mtp_depth": -1}, SEQ_LEN, "objective.mtp_depth=-1 must be 0 or more"),
        ({"mtp_depth": 8}, 8, "beyond data.seq_len=8"),
        ({"mtp_weight": -0.1}, SEQ_LEN, "objective.mtp_weight=-0.1 must be 0 or more"),
    ],
)
def test_bad_settings_are_refused(settings: dict, seq_len: int, message: str) -> None:
    with pytest.raises(LmptError, match=message):
        build_objective(MtpConfig(**settings), FakeTokenizer(), seq_len, "auto")
    with pytest.raises(LmptError, match="cannot train an encoder"):
        build_objective(MtpConfig(), FakeTokenizer(), SEQ_LEN, "encoder")


def test_preview_says_what_each_module_predicts(shakespeare) -> None:
    cfg = OmegaConf.structured(MtpConfig(mtp_depth=2))
    shown = " · ".join(settings(build_objective(cfg, shakespeare.tokenizer, SEQ_LEN, "auto")))
    assert (
        "mtp_depth=2 · mtp_weight=0.3" in shown and "module k = 1..2 the token k+1 ahead within its document" in shown
    )
