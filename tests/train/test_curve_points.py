"""Curve points during training (downstream.score_every, issue 31): the zero-shot tasks are scored on their fast
subsets at the chosen steps and logged as curve/TASK/FIGURE, and taking them changes no training number: a run with
curve points has the same losses and weights, bit for bit, as one without, killed and resumed or not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from golden import BASE, KILLED, assert_same, describe, golden_run, records, run, start_golden

from lmpt.train.evaluation import curve_due, take_curve_point

# 8 steps with dropout (a draw from the global random stream every step), a checkpoint, validation and curve every 4
ARGS = [
    *[a for a in BASE if not a.startswith(("trainer.max_steps=", "trainer.eval_every="))],
    "trainer.max_steps=8",
    "trainer.eval_every=4",
    "model.dropout=0.1",
]
KILL_AT = 35  # the 4th fault point of the second save (step 8): a first save passes 31 (LMPT_TEST_FAULT_TRACE)


class Scorer:
    every = 4

    def __init__(self, fail: bool = False) -> None:
        self.fail, self.seen = fail, []

    def __call__(self, model: torch.nn.Module, objective: object) -> dict[str, float]:
        self.seen.append((model.training, torch.is_grad_enabled()))
        draw = float(torch.rand(()))  # a scorer that draws from the global stream must not move training's
        if self.fail:
            raise RuntimeError("scoring failed")
        return {"curve/t/accuracy": draw}


def test_a_curve_point_scores_in_eval_mode_without_gradients_and_leaves_the_training_state() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.5)).train()
    scorer = Scorer()
    before = torch.get_rng_state()
    point = take_curve_point(scorer, model, None, torch.device("cpu"))
    assert scorer.seen == [(False, False)] and "curve/t/accuracy" in point
    assert model.training and torch.equal(torch.get_rng_state(), before)
    with pytest.raises(RuntimeError):
        take_curve_point(Scorer(fail=True), model, None, torch.device("cpu"))
    assert model.training and torch.equal(torch.get_rng_state(), before)
    assert [s for s in range(1, 11) if curve_due(scorer, s, last=s == 10)] == [4, 8, 10]
    assert not curve_due(None, 4, last=True)


@pytest.fixture(scope="module")
def tasks(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Two small zero-shot tasks (fewer items than downstream.curve_items: each curve scores the whole task)."""
    root = tmp_path_factory.mktemp("tasks")
    pairs = [{"sentence_good": f"The king is here {i}.", "sentence_bad": f"The king are here {i}."} for i in range(20)]
    cloze = [{"context": f"KING: my lord {i},", "choices": ["go", "stay", "speak"], "label": i % 3} for i in range(12)]
    (root / "pairs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in pairs))
    (root / "cloze.jsonl").write_text("".join(json.dumps(r) + "\n" for r in cloze))
    return [*ARGS, f"downstream.choice_tasks=[{root / 'pairs.jsonl'},{root / 'cloze.jsonl'}]"]


def curve_points(run_dir: Path) -> list[dict]:
    return [r for r in records(run_dir) if any(k.startswith("curve/") for k in r)]


@pytest.fixture(scope="module")
def gold(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("golden")


def test_curve_points_are_logged_at_their_steps_and_change_no_training_number(tasks: list[str], gold: Path) -> None:
    start_golden(gold, tasks)
    start_golden(gold, [*tasks, "downstream.score_every=4"])  # both at once: one core each
    without, with_curves = golden_run(gold, tasks), golden_run(gold, [*tasks, "downstream.score_every=4"])
    assert_same(without, with_curves, "score_every=4 against none")
    assert curve_points(without) == []
    points = curve_points(with_curves)
    assert [p["step"] for p in points] == [4, 8] and all(p["flops"] > 0 for p in points)
    assert {p["curve/pairs/n"] for p in points} == {20} and {p["curve/cloze/n"] for p in points} == {12}
    for p in points:
        assert not any(k.startswith("downstream/") for k in p)
        assert p["curve/pairs/accuracy_low"] <= p["curve/pairs/accuracy"] <= p["curve/pairs/accuracy_high"]
    (final,) = [r for r in records(with_curves) if any(k.startswith("downstream/") for k in r)]
    assert not any(k.startswith("curve/") for k in final)
    # one way to score: the last point, on the whole task, is the end-of-run figure of the final model
    for task, figure in (("pairs", "accuracy"), ("cloze", "accuracy"), ("cloze", "accuracy_norm")):
        assert points[-1][f"curve/{task}/{figure}"] == final[f"downstream/{task}/{figure}"], (task, figure)


def test_a_run_killed_after_a_curve_point_resumes_bitwise(tasks: list[str], gold: Path, tmp_path: Path) -> None:
    """Killed inside the checkpoint of step 8, after its curve point was logged: the restart resumes from step 4,
    drops that point and takes it again, once; losses and weights as a run without curves."""
    args = [*tasks, "downstream.score_every=4"]
    start_golden(gold, args)
    start_golden(gold, tasks)
    run_dir, trace = tmp_path / "killed", tmp_path / "faults.txt"
    killed = run(run_dir, args, LMPT_TEST_KILL_AT_FAULT=str(KILL_AT), LMPT_TEST_FAULT_TRACE=str(trace))
    assert killed.returncode == KILLED, describe(killed)
    assert ".tmp-step_00000008" in trace.read_text(), trace.read_text()  # killed writing the checkpoint of step 8
    assert [p["step"] for p in curve_points(run_dir)] == [4, 8]  # the point at 8 was logged before the kill
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir() if p.name.startswith("step_")) == [
        "step_00000004"
    ]
    result = run(run_dir, args)
    assert result.returncode == 0 and "resuming" in result.stdout, describe(result)
    assert_same(golden_run(gold, tasks), run_dir, "killed in the checkpoint after a curve point, against no curves")
    assert curve_points(run_dir) == curve_points(golden_run(gold, args))
