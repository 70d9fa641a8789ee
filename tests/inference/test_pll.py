"""Pseudo-log-likelihood: the batched masked copies give what masking one position at a time gives."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from lmpt.batch import IGNORE, Batch
from lmpt.config.schema import ModelConfig
from lmpt.inference.pll import masked_copies, score_pll
from lmpt.inference.progress import WorkBar
from lmpt.inference.scoring import Text
from lmpt.model import build_model
from lmpt.rundir.trained import Trained

SEQ_LEN = 24
TEXT = "Before we proceed any further, hear me speak. Speak, speak. You are all resolved rather to die than to famish?"


@pytest.fixture(scope="module")
def tiny_encoder(shakespeare) -> Trained:
    tokenizer = shakespeare.tokenizer
    torch.manual_seed(0)
    cfg = ModelConfig(name="tiny", d_model=32, n_layers=2, n_heads=2, ffn_dim=64, max_seq_len=SEQ_LEN)
    model = build_model(cfg, "encoder", tokenizer.vocab_size, tokenizer.special.pad).eval()
    return Trained(model, tokenizer, OmegaConf.create({}), "encoder", "mlm", Path("unused"))


def one_position_at_a_time(trained: Trained, tokens: list[int]) -> tuple[float, int]:
    """(nats, scored tokens): for each window and each ordinary token in it, mask that token alone, run the
    unpadded window, and take the log-softmax of the full logits at that position."""
    special, model = trained.tokenizer.special, trained.model
    nats, scored = 0.0, 0
    for start in range(0, len(tokens), SEQ_LEN):
        row = torch.tensor(tokens[start : start + SEQ_LEN])
        for i in range(row.numel()):
            if row[i] < special.first_ordinary:
                continue
            masked = row.clone()
            masked[i] = special.mask
            batch = Batch(
                input_ids=masked[None], labels=torch.full_like(masked[None], IGNORE), attention="bidirectional"
            )
            with torch.no_grad():
                logits = model.hidden_states(batch)[0, i].double() @ model.head_weight.double().t()
            nats -= float(torch.log_softmax(logits, dim=-1)[row[i]])
            scored += 1
    return nats, scored


def test_batched_copies_match_masking_one_position_at_a_time(tiny_encoder: Trained) -> None:
    tokenizer = tiny_encoder.tokenizer
    tokens = [*sum(tokenizer.encode_batch([TEXT, TEXT.upper()]), []), tokenizer.special.eos]
    assert len(tokens) % SEQ_LEN != 0  # the last window is short, so it is padded in the batches
    text = Text(tokens, len(TEXT.encode()) * 2, 1)
    with torch.no_grad():
        with WorkBar("scoring", hidden=True) as bar:
            score = score_pll(tiny_encoder, text, SEQ_LEN, batch_size=7, device=torch.device("cpu"), bar=bar)
    nats, scored = one_position_at_a_time(tiny_encoder, tokens)
    assert score.tokens == scored == sum(t >= tokenizer.special.first_ordinary for t in tokens)
    assert score.nats == pytest.approx(nats, rel=1e-5)
    assert score.windows == math.ceil(len(tokens) / SEQ_LEN)
    assert score.bytes == int(tokenizer.piece_bytes()[torch.tensor(tokens)].sum())


def test_each_copy_masks_one_position_and_labels_only_it() -> None:
    row = torch.tensor([11, 12, 13, 14])
    inputs, labels = masked_copies(row, torch.tensor([0, 2, 3]), mask_id=4)
    assert inputs.tolist() == [[4, 12, 13, 14], [11, 12, 4, 14], [11, 12, 13, 4]]
    assert labels.tolist() == [[11, IGNORE, IGNORE, IGNORE], [IGNORE, IGNORE, 13, IGNORE], [IGNORE, IGNORE, IGNORE, 14]]
