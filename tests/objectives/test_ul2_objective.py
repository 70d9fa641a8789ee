"""ul2-mixture: denoiser frequencies, mode tokens, each denoiser's rows, per-denoiser loss."""

from __future__ import annotations

import math

import pytest
import torch
from objective_helpers import (
    FakeTokenizer,
    assert_int64,
    assert_same_batch,
    batches,
    five_sigma,
    uncorrupt_spans,
    windows,
)

from lmpt.batch import IGNORE
from lmpt.model.output import ModelOutput
from lmpt.objectives.registry import build_objective
from lmpt.objectives.span import span_lengths
from lmpt.objectives.ul2 import DenoiserConfig, Ul2Config, s_target_range
from lmpt.rng import generator

SEQ_LEN = 64
TOKENIZER = FakeTokenizer(1024, num_sentinels=100)
SPECIAL = TOKENIZER.special
MODES = {"R": SPECIAL.nlu, "X": SPECIAL.nlg, "S": SPECIAL.s2s}


def test_default_mixture_is_uniform_over_the_seven_denoisers(shakespeare) -> None:
    ul2 = build_objective(Ul2Config(), TOKENIZER, SEQ_LEN, "auto")
    assert [d.label for d in ul2.denoisers] == ["R3-0.15", "R8-0.15", "S", "X3-0.5", "X8-0.5", "X64-0.15", "X64-0.5"]
    kinds = torch.cat([b.example_kinds for _, b in batches(ul2, shakespeare.train, 64, 30)])
    n, p = kinds.numel(), 1 / 7
    for i in range(7):
        assert abs(int((kinds == i).sum()) - n * p) <= five_sigma(n, p), ul2.denoisers[i].label


def test_weights_set_the_frequencies(shakespeare) -> None:
    cfg = Ul2Config(
        denoisers=[
            DenoiserConfig("R", 3, 0.15, 3.0),
            DenoiserConfig("S", 0, 0.25, 1.0),
            DenoiserConfig("X", 8, 0.5, 0.0),
        ]
    )
    ul2 = build_objective(cfg, TOKENIZER, SEQ_LEN, "auto")
    kinds = torch.cat([b.example_kinds for _, b in batches(ul2, shakespeare.train, 64, 20)])
    n = kinds.numel()
    assert abs(int((kinds == 0).sum()) - 0.75 * n) <= five_sigma(n, 0.75)
    assert int((kinds == 2).sum()) == 0


@pytest.mark.parametrize("arch", ["encoder-decoder", "decoder"])
def test_every_row_is_its_denoisers_corruption_of_the_window(shakespeare, arch: str) -> None:
    ul2 = build_objective(Ul2Config(), TOKENIZER, SEQ_LEN, arch)
    s_fractions = []
    for w, batch in batches(ul2, shakespeare.train, 32, 6):
        assert_int64(batch)
        assert batch.input_ids.shape == (32, SEQ_LEN)
        if arch == "encoder-decoder":
            assert batch.labels.shape == batch.decoder_input_ids.shape == (32, ul2.target_length)
            assert torch.equal(batch.decoder_input_ids[:, 1:], batch.labels[:, :-1].clamp(min=SPECIAL.pad))
            assert (batch.decoder_input_ids[:, 0] == SPECIAL.bos).all()
        else:
            assert batch.attention == "prefix" and batch.labels.shape == (32, SEQ_LEN)
        for row, kind in enumerate(batch.example_kinds.tolist()):
            d = ul2.denoisers[kind]
            ids, labels = batch.input_ids[row], batch.labels[row]
            assert ids[0] == MODES[d.kind]
            raw = w.tokens[row, : d.raw_length].tolist()
            carries = labels != IGNORE
            if arch == "encoder-decoder":
                targets = labels[carries].tolist()
                assert carries.tolist() == sorted(carries.tolist(), reverse=True)  # padding only at the end
                if d.kind == "S":
                    context = ids[1:][ids[1:] != SPECIAL.pad].tolist()
                    assert targets[-1] == SPECIAL.eos and context + targets[:-1] == raw
                    s_fractions.append((len(targets) - 1) / d.raw_length)
                else:
                    _, _, input_len, target_len = span_lengths(d.raw_length, d.noise_density, d.mean_span_length)
                    assert len(targets) == target_len and (ids[1 + input_len :] == SPECIAL.pad).all()
                    assert uncorrupt_spans(ids[1 : 1 + input_len].tolist(), targets, SPECIAL) == raw
            else:
                prefix_len = int(batch.prefix_len[row])
                positions = carries.nonzero().flatten()
                # every target token is a label, the first predicted from the last prefix position
                assert torch.equal(positions, torch.arange(prefix_len - 1, positions[-1] + 1))
                assert torch.equal(labels[positions[:-1]], ids[positions[:-1] + 1])  # shifted once
                context, targets = ids[1:prefix_len].tolist(), labels[positions].tolist()
                if d.kind == "S":
                    assert context + targets == raw
                    s_fractions.append(len(targets) / len(raw))
                else:
                    _, _, input_len, target_len = span_lengths(d.raw_length, d.noise_density, d.mean_span_length)
                    assert prefix_len == 1 + input_len and len(targets) == target_len
                    assert uncorrupt_spans(context, targets, SPECIAL) == raw
    # S: the target fraction is uniform on a range centred on 0.25 of the window
    s = ul2.denoisers[2]
    low, high = s_target_range(s.raw_length, 0.25)
    mean_target = (low + high) / 2
    sigma = math.sqrt(((high - low + 1) ** 2 - 1) / 12 / len(s_fractions)) / s.raw_length
    assert abs(sum(s_fractions) / len(s_fractions) - mean_target / s.raw_length) <= 5 * sigma
    assert abs(mean_target / s.raw_length - 0.25) <= 1 / s.raw_length


def test_loss_is_reported_per_denoiser() -> None:
    ul2 = build_objective(Ul2Config(), TOKENIZER, SEQ_LEN, "auto")
    batch_kinds = torch.tensor([0, 2, 2, 6])
    from lmpt.batch import Batch

    batch = Batch(input_ids=torch.zeros(4, 1), labels=torch.zeros(4, 1), example_kinds=batch_kinds)
    out = ModelOutput(
        token_loss=torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0]),
        token_correct=torch.tensor([True, False, True, False, False]),
        token_rows=torch.tensor([0, 1, 1, 2, 3]),
    )
    total, stats = ul2.loss(out, batch)
    assert total.item() == pytest.approx(3.0)
    assert [float(x) for x in stats["loss/R3-0.15"]] == [1.0, 1.0]
    assert [float(x) for x in stats["loss/S"]] == [9.0, 3.0]
    assert [float(x) for x in stats["loss/X64-0.5"]] == [5.0, 1.0]
    assert [float(x) for x in stats["loss/X3-0.5"]] == [0.0, 0.0]
    assert [float(x) for x in stats["acc"]] == [2.0, 5.0]


def test_same_seed_same_batch(shakespeare) -> None:
    ul2 = build_objective(Ul2Config(), TOKENIZER, SEQ_LEN, "auto")
    w = windows(shakespeare.train, ul2.window_length, 16, step=4)
    assert_same_batch(ul2.make_batch(w, generator(9, 4)), ul2.make_batch(w, generator(9, 4)))
