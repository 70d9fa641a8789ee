"""Zero-shot multiple choice: what is scored per architecture, how it is split and batched, and the figures."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from lmpt.batch import IGNORE, Batch
from lmpt.config.schema import ModelConfig
from lmpt.downstream.eval_cli import evaluate
from lmpt.downstream.likelihood import choice_batch, choice_figures, choice_scores, frame, split_tokens
from lmpt.downstream.zero_shot_files import ChoiceQuestion, read_choice_task
from lmpt.errors import LmptError
from lmpt.inference.pll import score_pll
from lmpt.inference.progress import WorkBar
from lmpt.inference.scoring import Text
from lmpt.inference.sentence_pll import framed_continuation
from lmpt.model import build_model
from lmpt.rundir.trained import Trained

QUESTIONS = [
    ChoiceQuestion("ROMEO: But soft, what light through yonder", ("window", "horse", "breaks on"), 0),
    ChoiceQuestion("First Citizen: Before we proceed any further, hear me", ("speak", "sword"), 0),
    ChoiceQuestion("", ("Speak, speak.", "All"), 1),
]


def _trained(shakespeare, arch: str, objective: str, max_seq_len: int = 64) -> Trained:
    torch.manual_seed(0)
    cfg = ModelConfig(name="tiny", d_model=32, n_layers=2, n_heads=2, ffn_dim=64, max_seq_len=max_seq_len)
    model = build_model(cfg, arch, shakespeare.tokenizer.vocab_size, shakespeare.tokenizer.special.pad).eval()
    return Trained(model, shakespeare.tokenizer, OmegaConf.create({}), arch, objective, Path("unused"))


def _scores(trained: Trained, questions=QUESTIONS, batch_size: int = 3, choice_pll: str = "conditional"):
    with torch.no_grad(), WorkBar("", hidden=True) as bar:
        return choice_scores(trained, questions, batch_size, torch.device("cpu"), bar, choice_pll)


def test_choice_tokens_are_the_whole_text_beyond_the_context(shakespeare) -> None:
    trained = _trained(shakespeare, "decoder", "clm")
    tok = trained.tokenizer
    context, choice = split_tokens(trained, "hear me ", "speak")  # trailing space moves to the choice
    assert context == tok.encode("hear me") and context + choice == tok.encode("hear me  speak")
    context, choice = split_tokens(trained, "hear me", "speak")
    assert context + choice == tok.encode("hear me speak") and tok.decode(choice).strip() == "speak"


def test_decoder_scores_are_the_causal_log_likelihood_of_the_choice(shakespeare) -> None:
    trained = _trained(shakespeare, "decoder", "clm")
    scores = _scores(trained, batch_size=2)  # rows of different lengths padded together
    for question, found in zip(QUESTIONS, scores, strict=True):
        for choice, score in zip(question.choices, found, strict=True):
            context, target = split_tokens(trained, question.context, choice)
            ids = torch.tensor([trained.tokenizer.special.eos, *context, *target])  # after eos, empty or not
            with torch.no_grad():
                logits = trained.model.logits(ids[None, :-1])[0].double().log_softmax(-1)
            first = len(ids) - len(target) - 1
            expected = sum(float(logits[first + i, t]) for i, t in enumerate(target))
            assert score == pytest.approx(expected, rel=1e-5, abs=1e-5)


@pytest.mark.parametrize(
    ("arch", "objective", "attention"),
    [
        ("decoder", "prefix", "prefix"),
        ("decoder", "ul2-mixture", "prefix"),
        ("encoder-decoder", "span", None),
        ("encoder-decoder", "ul2-mixture", None),
    ],
)
def test_each_objective_sees_the_choice_as_it_trained(shakespeare, arch: str, objective: str, attention) -> None:
    trained = _trained(shakespeare, arch, objective)
    special = trained.tokenizer.special
    context, choice = [11, 12, 13], [21, 22]
    framed = frame(trained, context, choice)
    batch = choice_batch(trained, [framed])
    scored = batch.labels[batch.labels != IGNORE].tolist()
    assert scored == choice  # only the choice's tokens carry a score
    if objective == "ul2-mixture":
        assert framed.source == [special.s2s, *context]
    if objective == "span":
        assert framed.source == [*context, special.sentinel(0), special.eos]
        assert batch.decoder_input_ids[0].tolist() == [special.bos, special.sentinel(0), 21]
    if attention == "prefix":
        assert batch.attention == "prefix" and batch.prefix_len.tolist() == [len(framed.source)]
    scores = _scores(trained)
    assert all(len(s) == len(q.choices) and all(v < 0 for v in s) for q, s in zip(QUESTIONS, scores, strict=True))


@pytest.mark.parametrize("objective", ["clm", "mtp", "fim", "gpt-bert", "prefix"])
def test_every_decoder_reads_a_context_after_eos(shakespeare, objective: str) -> None:
    """One framing for a decoder: every text after eos, as a training document starts and lmpt-generate prompts;
    an empty context is eos alone. Only the choice is scored."""
    trained = _trained(shakespeare, "decoder", objective)
    eos = trained.tokenizer.special.eos
    for context in ([11, 12, 13], []):
        framed = frame(trained, context, [21, 22])
        assert (framed.source, framed.target, framed.skip) == ([eos, *context], [21, 22], 0)
        batch = choice_batch(trained, [framed])
        assert batch.input_ids[0].tolist() == [eos, *context, 21]
        assert batch.labels[batch.labels != IGNORE].tolist() == [21, 22]
        if trained.objective.reads_prefix:
            assert batch.attention == "prefix" and batch.prefix_len.tolist() == [len(context) + 1]


def test_long_contexts_are_cut_from_the_left_to_fit(shakespeare) -> None:
    trained = _trained(shakespeare, "decoder", "clm", max_seq_len=16)
    framed = frame(trained, list(range(100, 140)), [7, 8, 9])  # eos + 40 tokens: the eos goes first, as in lm_eval
    assert framed.source == list(range(126, 140)) and len(framed.source) + len(framed.target) - 1 == 16
    framed = frame(trained, list(range(100, 113)), [7, 8, 9])  # eos + 13 + 3 - 1 = 16 inputs: it fits whole
    assert framed.source == [trained.tokenizer.special.eos, *range(100, 113)]
    long = [ChoiceQuestion("word " * 200, ("a", "b"), 0)]
    assert len(_scores(trained, long)[0]) == 2


def _one_copy_at_a_time(trained: Trained, ids: list[int], scored: range) -> float:
    """The reference PLL: for each position of `scored` holding an ordinary token, `ids` with that one token masked
    goes through the model alone (no padding, no other copy beside it) and its log-probability is added."""
    special, total = trained.tokenizer.special, 0.0
    for position in scored:
        if ids[position] < special.first_ordinary:
            continue
        inputs, labels = torch.tensor([ids]), torch.full((1, len(ids)), IGNORE)
        inputs[0, position], labels[0, position] = special.mask, ids[position]
        segments = torch.zeros_like(inputs) if trained.objective.n_segments else None
        with torch.no_grad():
            out = trained.model(Batch(input_ids=inputs, labels=labels, attention="bidirectional", segment_ids=segments))
        total -= float(out.token_loss.double().sum())
    return total


class _CountingBar:
    """Records what a scorer announces (`start`) and what it then does (`advance`)."""

    def __init__(self) -> None:
        self.total, self.done = 0, 0

    def start(self, total: int) -> None:
        self.total = total

    def advance(self, done: int = 1) -> None:
        self.done += done


@pytest.mark.parametrize("objective", ["mlm", "nsp"])  # nsp: the choice read in [CLS] ... [SEP]
def test_encoder_conditional_pll_batched_equals_one_copy_at_a_time(shakespeare, objective: str) -> None:
    trained = _trained(shakespeare, "encoder", objective)
    before, after = trained.objective.text_frame(trained.tokenizer.special)
    questions = QUESTIONS + read_choice_task("bundled:shakespeare-cloze")[:6]  # contexts of 0 to ~30 tokens
    bar = _CountingBar()
    with torch.no_grad():  # 5 copies a pass: copies of several choices and questions share a pass
        scores = choice_scores(trained, questions, 5, torch.device("cpu"), bar)  # type: ignore[arg-type]
    assert bar.done == bar.total > 0  # the bar announces the work it then does
    lengths = set()
    for question, found in zip(questions, scores, strict=True):
        expected = []
        for choice in question.choices:
            context, target = split_tokens(trained, question.context, choice)
            ids = [*before, *context, *target, *after]
            lengths.add(len(ids))
            start = len(before) + len(context)  # the context is read, never masked: only the choice is scored
            expected.append(_one_copy_at_a_time(trained, ids, range(start, start + len(target))))
        assert found == pytest.approx(expected, rel=1e-5, abs=1e-5)
        assert found.index(max(found)) == expected.index(max(expected))  # the same choice wins
    assert len(lengths) > 5


def test_encoder_whole_text_pll_is_every_token_of_context_and_choice(shakespeare) -> None:
    trained = _trained(shakespeare, "encoder", "mlm")
    scores = _scores(trained, batch_size=5, choice_pll="whole")
    for question, found in zip(QUESTIONS, scores, strict=True):
        for choice, score in zip(question.choices, found, strict=True):
            filled = trained.tokenizer.encode(f"{question.context} {choice}" if question.context else choice)
            with torch.no_grad(), WorkBar("", hidden=True) as bar:
                pll = score_pll(trained, Text(filled, 0, 1), len(filled), 8, torch.device("cpu"), bar)
            assert score == pytest.approx(-pll.nats, rel=1e-5, abs=1e-5)
            assert score == pytest.approx(_one_copy_at_a_time(trained, filled, range(len(filled))), abs=1e-5)
    conditional = _scores(trained, batch_size=5)  # the same copies for the choice's tokens, none for the context's
    for question, whole, choice_only in zip(QUESTIONS, scores, conditional, strict=True):
        assert all(w < c if question.context else w <= c + 1e-6 for w, c in zip(whole, choice_only, strict=True))


def test_an_encoder_choice_too_long_for_the_model_keeps_its_end(shakespeare) -> None:
    trained = _trained(shakespeare, "encoder", "nsp", max_seq_len=16)
    special = trained.tokenizer.special
    ids, start = framed_continuation(trained, list(range(100, 140)), [7, 8, 9])
    assert ids == [special.cls, *range(129, 140), 7, 8, 9, special.sep] and start == 12  # 16 tokens
    ids, start = framed_continuation(trained, [100], list(range(200, 220)))  # the choice alone is too long
    assert ids == [special.cls, *range(206, 220), special.sep] and start == 1
    long = [ChoiceQuestion("word " * 200, ("a", "b"), 0)]
    assert len(_scores(trained, long)[0]) == 2


def test_lmpt_eval_refuses_an_unknown_choice_pll() -> None:
    with pytest.raises(LmptError, match="choice_pll=both is unknown: use conditional or whole"):
        evaluate(["no-run", "task=bundled:shakespeare-cloze", "choice_pll=both"])


def test_figures_take_the_best_raw_and_per_byte_score() -> None:
    questions = [ChoiceQuestion("c", ("a", "bbbb"), 1), ChoiceQuestion("c", ("a", "bb", "ccc"), 0)]
    # q0: raw picks "a" (-2 > -4), per byte picks "bbbb" (-1 > -2); q1: both pick "a"
    figures = choice_figures(questions, [[-2.0, -4.0], [-1.0, -5.0, -6.0]])
    assert figures == {"accuracy": 0.5, "accuracy_norm": 1.0, "chance": pytest.approx((1 / 2 + 1 / 3) / 2), "n": 2}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["task=bundled:shakespeare-cloze", "control=untrained"], "control=untrained is unknown: use scratch or none"),
        (["data=bundled:shakespeare", "control=scratch"], "control=scratch needs task=: text has no control"),
    ],
)
def test_lmpt_eval_refuses_a_control_it_cannot_score(argv: list[str], message: str) -> None:
    with pytest.raises(LmptError, match=message):
        evaluate(["no-run", *argv])
