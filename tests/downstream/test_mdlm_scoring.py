"""Zero-shot scoring of a masked diffusion run (objective=mdlm) by the diffusion bound of each choice, as LLaDA
evaluates: fixed draws of exact-count masks over the choice's tokens, the context visible; the run and its untrained
control through the normal commands, and the records saying so."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf
from runner import SMALL, TINY_RUN, run_lmpt

from lmpt.batch import IGNORE, Batch
from lmpt.config.schema import ModelConfig
from lmpt.downstream.bundled import tasks_dir
from lmpt.downstream.eval_cli import evaluate
from lmpt.downstream.likelihood import choice_scores, own_scorer, split_tokens, whole_rows
from lmpt.downstream.zero_shot_files import ChoiceQuestion
from lmpt.errors import LmptError
from lmpt.inference.progress import WorkBar
from lmpt.objectives.mdlm import BoundScorer, MaskedDiffusion, MdlmConfig
from lmpt.objectives.registry import OBJECTIVES, build_objective
from lmpt.rundir.trained import Trained
from tests.objectives.objective_helpers import FakeTokenizer

TOK = FakeTokenizer(vocab_size=200)
MODEL = ModelConfig(d_model=16, n_layers=1, n_heads=2, ffn_dim=32, max_seq_len=16)
TINY = [
    "objective=mdlm",
    *TINY_RUN,
    "trainer.max_steps=2",
    "objective.eval_draws=2",
    "objective.score_draws=4",
]


def mask_predictor(vocab: int = 256):
    """A freshly initialised mdlm model (its head never predicts [MASK]) in eval mode."""
    torch.manual_seed(0)
    objective = build_objective(OmegaConf.structured(MdlmConfig), TOK, 12, "auto")
    return objective.build_model(MODEL, vocab).eval()


def cost(model, row: list[int], masked: tuple[int, ...]) -> float:
    """Cross-entropy (nats) of `row`'s tokens at `masked`, those positions [MASK] and the rest visible."""
    inputs, labels = torch.tensor([row]), torch.full((1, len(row)), IGNORE)
    inputs[0, list(masked)] = TOK.special.mask
    labels[0, list(masked)] = torch.tensor(row)[list(masked)]
    return float(model(Batch(input_ids=inputs, labels=labels, attention="bidirectional")).token_loss.sum())


def bound_scores(scorer: BoundScorer, model, rows: list[list[int]], starts: list[int], batch_size: int) -> list[float]:
    with torch.inference_mode():
        return scorer.scores(model, rows, starts, batch_size, lambda n: None)


@torch.no_grad()
def test_a_choice_scores_minus_the_mean_weighted_cost_of_its_draws_context_never_masked() -> None:
    """The scorer's figure is the direct computation: per draw, the cross-entropy of the masked choice tokens with
    the head that never predicts [MASK] (as in training), times n / k; minus their mean. Batching changes nothing."""
    model = mask_predictor()
    scorer = BoundScorer(draws=6, special=TOK.special, tokenizer_vocab=200)
    first = TOK.special.first_ordinary
    rows = [[TOK.special.eos, first + 5, first + 9, first + 1, first + 40, first + 7], [TOK.special.eos, first + 3]]
    starts = [3, 1]
    inputs, labels, rates = scorer.choice_draws(rows[0], starts[0])
    masked = labels != IGNORE
    assert not masked[:, :3].any() and torch.equal(inputs[:, :3], torch.tensor(rows[0][:3]).repeat(6, 1))
    assert sorted(int(k) for k in masked.sum(dim=1)) == [1, 1, 2, 2, 3, 3]  # k stratified over 1..3
    assert torch.allclose(rates, masked.sum(dim=1) / 3)
    direct = [cost(model, rows[0], tuple(int(i) for i in m.nonzero()[:, 0])) * 3 / int(m.sum()) for m in masked]
    alone = bound_scores(scorer, model, rows[:1], starts[:1], 1)
    together = bound_scores(scorer, model, rows, starts, 2)
    assert alone[0] == pytest.approx(-sum(direct) / 6, rel=1e-5)
    assert together[0] == pytest.approx(alone[0], rel=1e-5)
    assert bound_scores(scorer, model, [rows[0][:3]], [3], 1) == [0.0]  # nothing to score


@torch.no_grad()
def test_with_many_draws_the_estimate_reaches_the_bound_summed_over_every_mask() -> None:
    """On a 4-token choice after a 3-token context the bound is a finite sum over every set of masked choice tokens:
    sum over k of 1/k x the mean over k-sets of their cross-entropy (nats); many draws hit it."""
    model = mask_predictor()
    first = TOK.special.first_ordinary
    row, start, n = [TOK.special.eos, first + 2, first + 8, first + 30, first + 4, first + 11, first + 50], 3, 4
    exact = sum(
        sum(cost(model, row, tuple(start + i for i in s)) for s in itertools.combinations(range(n), k))
        / math.comb(n, k)
        / k
        for k in range(1, n + 1)
    )
    scorer = BoundScorer(draws=2000, special=TOK.special, tokenizer_vocab=200)
    assert -bound_scores(scorer, model, [row], [start], 1)[0] == pytest.approx(exact, rel=0.02)


def test_every_choice_sees_the_same_draws() -> None:
    """Common random numbers: two choices of the same shape are masked at the same positions with the same counts."""
    scorer = BoundScorer(draws=8, special=TOK.special, tokenizer_vocab=200)
    first = TOK.special.first_ordinary
    good = scorer.choice_draws([TOK.special.eos, first, first + 1, first + 2], 1)
    bad = scorer.choice_draws([TOK.special.eos, first, first + 5, first + 9], 1)
    assert torch.equal(good[1] != IGNORE, bad[1] != IGNORE) and torch.equal(good[2], bad[2])


def test_only_mdlm_scores_by_its_own_way_and_bad_draws_are_refused() -> None:
    """Every other objective leaves zero-shot scoring to its architecture; mdlm's draws come from its settings (an
    older run without the key takes the default), fewer than one refused in one line at launch and at scoring."""
    assert [name for name, cls in OBJECTIVES.items() if cls.choice_scorer(None, TOK) is not None] == ["mdlm"]
    assert MaskedDiffusion.choice_scorer(None, TOK).draws == MdlmConfig.score_draws  # type: ignore[union-attr]
    assert MaskedDiffusion.choice_scorer(OmegaConf.create({"score_draws": 5}), TOK).draws == 5  # type: ignore[union-attr]
    with pytest.raises(LmptError, match=r"objective.score_draws=0 must be at least 1"):
        MaskedDiffusion.choice_scorer(OmegaConf.create({"score_draws": 0}), TOK)
    with pytest.raises(LmptError, match=r"objective.score_draws=-1 must be at least 1"):
        build_objective(OmegaConf.merge(OmegaConf.structured(MdlmConfig), {"score_draws": -1}), TOK, 12, "auto")
    assert OBJECTIVES["clm"].choice_scorer(None, TOK) is None


def test_a_launch_with_score_draws_below_one_is_one_line_exit_2_nothing_written(tmp_path: Path) -> None:
    args = [*SMALL, "objective=mdlm", "objective.score_draws=0", f"hydra.run.dir={tmp_path / 'run'}"]
    done = run_lmpt(*args, cwd=tmp_path)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith("lmpt: error:"), done.stderr
    assert "objective.score_draws=0 must be at least 1" in lines[0] and list(tmp_path.iterdir()) == []


@torch.no_grad()
def test_the_cloze_frame_is_eos_then_the_context_and_only_the_choice_is_scored(shakespeare) -> None:
    """The objective's scoring frame (eos, the context) then the choice, cut from the left to fit the model."""
    tok = shakespeare.tokenizer
    objective = build_objective(OmegaConf.structured(MdlmConfig), tok, 32, "auto")
    model = objective.build_model(
        ModelConfig(d_model=16, n_layers=1, n_heads=2, ffn_dim=32, max_seq_len=64), tok.vocab_size
    )
    trained = Trained(
        model.eval(), tok, OmegaConf.create({"objective": {"score_draws": 3}}), "encoder", "mdlm", Path("unused")
    )
    questions = [ChoiceQuestion("ROMEO: But soft, what light", ("window", "horse breaks"), 0)]
    rows, starts = whole_rows(trained, questions)
    for choice, row, start in zip(questions[0].choices, rows, starts, strict=True):
        context, target = split_tokens(trained, questions[0].context, choice)
        assert row == [tok.special.eos, *context, *target] and start == 1 + len(context)
    long = [ChoiceQuestion("ROMEO: But soft, what light through yonder window breaks? " * 8, ("It is",), 0)]
    (row,), (start,) = whole_rows(trained, long)
    context, target = split_tokens(trained, long[0].context, "It is")
    assert row == [*context, *target][-64:] and start == 64 - len(target)
    with WorkBar("", hidden=True) as bar:
        scores = choice_scores(trained, questions, 2, torch.device("cpu"), bar)
    scorer = own_scorer(trained)
    assert scorer is not None and scorer.draws == 3
    assert scores[0] == pytest.approx(bound_scores(scorer, model, rows, starts, 1), rel=1e-6)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(run directory, pair file, cloze file): a tiny mdlm run that scored 12 BLiMP pairs and 3 cloze questions (from
    the bundled tasks) with their untrained control when it ended."""
    root = tmp_path_factory.mktemp("mdlm-scoring")
    lines = (tasks_dir() / "blimp-fast.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    pairs, cloze = root / "pairs.jsonl", root / "cloze.jsonl"
    pairs.write_text("".join(lines[:6] + lines[30:36]), encoding="utf-8")
    questions = (tasks_dir() / "shakespeare-cloze.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    cloze.write_text("".join(questions[:3]), encoding="utf-8")
    task, run_dir = f"downstream.choice_tasks=[{pairs},{cloze}]", f"hydra.run.dir={root / 'run'}"
    done = run_lmpt(*TINY, task, run_dir, cwd=root)
    assert done.returncode == 0, done.stderr[-3000:]
    return root / "run", pairs, cloze


def test_the_run_and_its_control_are_scored_by_the_bound_and_say_so(run: tuple[Path, Path, Path]) -> None:
    run_dir = run[0]
    for name in ("pairs", "cloze"):
        record = json.loads((run_dir / "downstream" / f"{name}.json").read_text())
        assert record["objective"] == "mdlm" and "diffusion bound" in record["method"], record["method"]
        assert "4 fixed draws" in record["method"] and record["control"] == "scratch"
        assert "accuracy_items" in record["scratch"] and "accuracy" in record["gain"]


def test_lmpt_eval_gives_the_same_scores_every_time(run: tuple[Path, Path, Path], capsys) -> None:
    """Fixed draws: lmpt-eval scores as the run scored when it ended, every time, and so does its control."""
    from lmpt.downstream.control import scratch_twin
    from lmpt.downstream.likelihood import pair_scores
    from lmpt.downstream.task import Scoring, read_task
    from lmpt.rundir.trained import load_trained

    run_dir, pairs, cloze = run
    for task, name in ((pairs, "pairs"), (cloze, "cloze")):
        results = []
        for _ in range(2):
            evaluate([str(run_dir), f"task={task}", "json=true", "control=none"])
            results.append(json.loads(capsys.readouterr().out))
        record = json.loads((run_dir / "downstream" / f"{name}.json").read_text())
        assert results[0] == results[1] and results[0]["accuracy_items"] == record["accuracy_items"]
        assert results[0]["method"] == record["method"]
    trained = load_trained(run_dir)
    twin = read_task(str(pairs), how=Scoring(batch_size=8, hidden=True)).evaluate(scratch_twin(trained))
    record = json.loads((run_dir / "downstream" / "pairs.json").read_text())
    assert "diffusion bound" in twin["method"] and twin["accuracy_items"] == record["scratch"]["accuracy_items"]
    items = read_task(str(pairs)).items
    with torch.inference_mode(), WorkBar("", hidden=True) as bar:
        first = pair_scores(trained, list(items), 8, torch.device("cpu"), bar)
        second = pair_scores(trained, list(items), 3, torch.device("cpu"), bar)  # another batch size
    assert first[0] == pytest.approx(second[0], rel=1e-5) and first[1] == pytest.approx(second[1], rel=1e-5)
    assert all(s < 0 for s in first[0] + first[1])  # minus a bound in nats
