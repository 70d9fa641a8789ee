"""Zero-shot minimal pairs: what each architecture scores, the batched (and within-word) PLL, the subsets, the
bootstrap interval and the refusal of a file in neither task format."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from lmpt.batch import Batch
from lmpt.config.schema import ModelConfig
from lmpt.downstream.kinds.pairs import PairsResult
from lmpt.downstream.likelihood import evaluate_pairs, pair_figures, pair_scores, sentence_tokens, split_tokens
from lmpt.downstream.significance import accuracy_with_interval, bootstrap_interval
from lmpt.downstream.task import kind_of, read_task
from lmpt.downstream.zero_shot_files import MinimalPair, read_pairs
from lmpt.errors import LmptError
from lmpt.inference.pll import score_pll
from lmpt.inference.progress import WorkBar
from lmpt.inference.scoring import Text
from lmpt.inference.sentence_pll import framed_ids, pll_copies, text_plls
from lmpt.model import build_model
from lmpt.rundir.trained import Trained

PAIRS = [
    MinimalPair("The cats sleep.", "The cats sleeps.", "morphology", "agreement"),
    MinimalPair("Who did you see?", "Who did you see him?", "syntax", "island"),
    MinimalPair("She herself left.", "She himself left.", "morphology", "anaphor"),
]
CPU = torch.device("cpu")


def _trained(shakespeare, arch: str, objective: str) -> Trained:
    torch.manual_seed(0)
    cfg = ModelConfig(name="tiny", d_model=32, n_layers=2, n_heads=2, ffn_dim=64, max_seq_len=64)
    model = build_model(cfg, arch, shakespeare.tokenizer.vocab_size, shakespeare.tokenizer.special.pad).eval()
    return Trained(model, shakespeare.tokenizer, OmegaConf.create({}), arch, objective, Path("unused"))


def _scores(trained: Trained, pairs=PAIRS, batch_size: int = 3, within_word: bool = False):
    with torch.no_grad(), WorkBar("", hidden=True) as bar:
        return pair_scores(trained, pairs, batch_size, CPU, bar, within_word)


def _loglikelihood(trained: Trained, sentence: str) -> float:
    """The sentence's log-likelihood after eos, one full causal forward pass."""
    target = split_tokens(trained, "", sentence)[1]
    ids = torch.tensor([trained.tokenizer.special.eos, *target])
    with torch.no_grad():
        logp = trained.model.logits(ids[None, :-1])[0].double().log_softmax(-1)
    return sum(float(logp[i, t]) for i, t in enumerate(target))


def test_a_decoder_pair_is_the_difference_of_two_independent_log_likelihoods(shakespeare) -> None:
    trained = _trained(shakespeare, "decoder", "clm")
    good, bad = _scores(trained, batch_size=2)  # sentences of different lengths padded together
    for pair, g, b in zip(PAIRS, good, bad, strict=True):
        expected_good, expected_bad = _loglikelihood(trained, pair.good), _loglikelihood(trained, pair.bad)
        assert g == pytest.approx(expected_good, rel=1e-5, abs=1e-5)
        assert g - b == pytest.approx(expected_good - expected_bad, rel=1e-5, abs=1e-5)


@pytest.mark.parametrize("objective", ["span", "ul2-mixture"])
def test_an_encoder_decoder_scores_each_sentence_as_a_negative_log_likelihood(shakespeare, objective: str) -> None:
    good, bad = _scores(_trained(shakespeare, "encoder-decoder", objective))
    assert len(good) == len(bad) == len(PAIRS) and all(v < 0 for v in good + bad)


def test_batched_pll_equals_one_sentence_at_a_time(shakespeare) -> None:
    trained = _trained(shakespeare, "encoder", "mlm")
    good, bad = _scores(trained, batch_size=5)  # copies of several sentences share each forward pass
    for sentence, found in zip([p.good for p in PAIRS] + [p.bad for p in PAIRS], good + bad, strict=True):
        ids = trained.tokenizer.encode(sentence)
        with torch.no_grad(), WorkBar("", hidden=True) as bar:
            alone = score_pll(trained, Text(ids, 0, 1), len(ids), 1, CPU, bar)
        assert found == pytest.approx(-alone.nats, rel=1e-5, abs=1e-5)


def test_within_word_masking_hides_the_rest_of_the_word_only() -> None:
    starts = torch.zeros(20, dtype=torch.bool)
    starts[[0, 1, 2, 3, 4, 10, 12]] = True  # reserved ids 0-4 and two word-initial pieces
    row = torch.tensor([10, 11, 11, 12, 13, 3])  # word 10 11 11, word 12 13, then a reserved id (eos)
    plain, labels = pll_copies(row, first_ordinary=5, mask_id=4)
    inputs, same_labels = pll_copies(row, first_ordinary=5, mask_id=4, word_starts=starts)
    assert torch.equal(labels, same_labels) and labels.shape == (5, 6)  # the reserved id is never scored
    assert (plain == 4).sum(1).tolist() == [1, 1, 1, 1, 1]
    masked = [[int(i) for i in torch.nonzero(copy == 4).flatten()] for copy in inputs]
    assert masked == [[0, 1, 2], [1, 2], [2], [3, 4], [4]]


def test_within_word_pll_is_the_same_batched_as_copy_by_copy(shakespeare) -> None:
    trained = _trained(shakespeare, "encoder", "mlm")
    special, starts = trained.tokenizer.special, trained.tokenizer.word_starts()
    sentences = ["Unsheathe thy rapier, villain.", "Thou art a knave."]
    rows = [framed_ids(trained, s) for s in sentences]
    assert any(not starts[t] for t in rows[0])  # a word of several pieces, so the option changes something
    with torch.no_grad(), WorkBar("", hidden=True) as bar:
        batched = text_plls(trained, rows, 4, CPU, bar, within_word=True)
        plain = text_plls(trained, rows, 4, CPU, bar)
    for row, found in zip(rows, batched, strict=True):
        inputs, labels = pll_copies(torch.tensor(row), special.first_ordinary, special.mask, starts)
        total = 0.0
        with torch.no_grad():
            for copy, label in zip(inputs, labels, strict=True):  # one copy per forward pass, no padding
                out = trained.model(Batch(input_ids=copy[None], labels=label[None], attention="bidirectional"))
                total -= float(out.token_loss.double().sum())
        assert found == pytest.approx(total, rel=1e-5, abs=1e-5)
    assert batched[0] != pytest.approx(plain[0])


def _write(path: Path, records: list) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_subsets_per_field_paradigm_and_equal_length(tmp_path: Path) -> None:
    records = [
        {"sentence_good": "a b", "sentence_bad": "a b c", "field": "syntax", "UID": "p1"},
        {"sentence_good": "a b", "sentence_bad": "b a", "field": "syntax", "UID": "p1"},
        {"sentence_good": "x y z", "sentence_bad": "y x", "field": "semantics", "UID": "p2"},
        {"sentence_good": "x y", "sentence_bad": "y x", "field": "semantics", "UID": "p3"},
    ]
    pairs = read_pairs(str(_write(tmp_path / "pairs.jsonl", records)))
    assert pairs[0] == MinimalPair("a b", "a b c", "syntax", "p1", "-")
    good, bad = [-1.0, -2.0, -3.0, -1.0], [-2.0, -1.0, -1.0, -3.0]  # right, wrong, wrong, right
    result = pair_figures(pairs, good, bad, good_tokens=[2, 2, 3, 2], bad_tokens=[3, 2, 2, 2])
    assert result["n"] == 4 and result["accuracy"] == 0.5 and result["chance"] == 0.5
    assert result["equal_length"]["n"] == 2 and result["equal_length"]["accuracy"] == 0.5
    assert result["accuracy_equal_length"] == 0.5
    assert result["length_baseline"] == pytest.approx((1 + 0.5 + 0 + 0.5) / 4)  # shorter wins, a tie half
    assert {k: (g["n"], g["accuracy"]) for k, g in result["fields"].items()} == {
        "semantics": (2, 0.5),
        "syntax": (2, 0.5),
    }
    assert {k: (g["n"], g["accuracy"]) for k, g in result["paradigms"].items()} == {
        "p1": (2, 0.5),
        "p2": (1, 0.0),
        "p3": (1, 1.0),
    }
    assert json.loads(json.dumps(result)) == result
    assert PairsResult(result).logged() == {
        "accuracy": 0.5,
        "accuracy_equal_length": 0.5,
        "chance": 0.5,
        "length_baseline": 0.5,
    }


def test_a_file_is_scored_end_to_end_and_tokens_decide_equal_length(shakespeare, tmp_path: Path) -> None:
    trained = _trained(shakespeare, "decoder", "clm")
    records = [{"sentence_good": p.good, "sentence_bad": p.bad, "field": p.field, "UID": p.paradigm} for p in PAIRS]
    task = read_task(str(_write(tmp_path / "p.jsonl", records)))
    assert task.kind == "pairs"
    result = evaluate_pairs(trained, task.items, 4, hidden=True)
    equal = sum(len(sentence_tokens(trained, p.good)) == len(sentence_tokens(trained, p.bad)) for p in PAIRS)
    assert result["n"] == 3 and result["equal_length"]["n"] == equal
    assert set(result["fields"]) == {"morphology", "syntax"} and len(result["paradigms"]) == 3


def test_the_bootstrap_interval_holds_the_estimate_and_repeats() -> None:
    correct = np.random.default_rng(5).random(500) < 0.6
    low, high = bootstrap_interval(correct)
    assert low < correct.mean() < high and 0.5 < low and high < 0.7
    assert bootstrap_interval(correct) == (low, high)  # seeded: the same items give the same interval
    assert bootstrap_interval(correct, seed=1) != (low, high)
    assert high - low == pytest.approx(2 * 1.96 * np.sqrt(0.6 * 0.4 / 500), rel=0.15)  # about the normal width
    assert accuracy_with_interval([]) == {"n": 0, "accuracy": None, "interval": None}
    # the draws of the records written before scipy.stats.bootstrap took over: item indices from default_rng(0), in
    # order, and the 2.5th and 97.5th percentiles of the resampled means (scipy.stats.quantile interpolates in another
    # order than numpy's: a bound may differ in its last bit); a one-item sample is its own interval
    draws = np.random.default_rng(0).integers(0, 500, size=(1000, 500))
    before = np.quantile(correct[draws].mean(axis=1), [0.025, 0.975])
    assert (low, high) == pytest.approx(tuple(before), rel=1e-15, abs=0)
    assert bootstrap_interval([0.25]) == (0.25, 0.25)


def test_a_file_in_neither_format_is_refused_in_one_line(tmp_path: Path) -> None:
    path = _write(tmp_path / "texts.jsonl", [{"text": "hello", "label": 1}])
    with pytest.raises(LmptError) as caught:
        kind_of(str(path))
    message = str(caught.value)
    assert "\n" not in message and f"{path}:1" in message and "sentence_good" in message and "context" in message
    choice = _write(tmp_path / "choice.jsonl", [{"context": "c", "choices": ["a", "b"], "label": 0}])
    assert kind_of(str(choice)).kind == "choice" and len(read_task(str(choice)).items) == 1
    broken = _write(tmp_path / "broken.jsonl", [{"sentence_good": "a", "sentence_bad": "b"}, {"sentence_good": "a"}])
    with pytest.raises(LmptError, match=r"broken.jsonl:2 has no field 'sentence_bad'"):
        read_pairs(str(broken))
