"""trainer.budget: a run of a given compute (FLOPs, tokens or minutes) instead of a step count."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf
from runner import SMALL, records, run_lmpt

from lmpt.config.budget import Budget, parse_budget
from lmpt.errors import LmptError
from lmpt.train.budget import plan_length, refuse_two_lengths
from lmpt.train.metrics import StepCost
from lmpt.train.optim import lr_multiplier

ARGS = [
    *(a for a in SMALL if not a.startswith("scheduler.warmup_steps=")),  # a resume refuses a retyped, changed key
    "scheduler.warmup_steps=1",
    "trainer.log_every=1",
    "trainer.eval_every=0",
    "trainer.sample_tokens=0",
    "trainer.eval_batches=2",
]
FLOPS_BUDGET = 2.5e10  # about 8 steps of this tiny model


@pytest.mark.parametrize(
    ("text", "budget"),
    [
        ("3e12flops", Budget(3e12, "flops")),
        ("2Mtokens", Budget(2e6, "tokens")),
        ("1.5 T flops", Budget(1.5e12, "flops")),
        ("5min", Budget(5.0, "minutes")),
        ("90minutes", Budget(90.0, "minutes")),
        ("400k_tokens", Budget(4e5, "tokens")),
        ("16epochs", Budget(16.0, "epochs")),
        ("1 epoch", Budget(1.0, "epochs")),
        (None, None),
    ],
)
def test_budget_amounts_and_units(text: str | None, budget: Budget | None) -> None:
    assert parse_budget(text) == budget


@pytest.mark.parametrize("text", ["5 hours", "2Mtoken s", "0flops", "-1min", "1e400flops", "1e300Ptokens"])
def test_a_budget_without_a_known_unit_is_refused(text: str) -> None:
    with pytest.raises(LmptError, match=f"trainer.budget={re.escape(text)}"):
        parse_budget(text)


def test_the_schedule_follows_the_share_of_the_budget_spent() -> None:
    cfg = {"name": "cosine", "warmup_steps": 2, "min_lr_ratio": 0.1, "decay_fraction": 0.2}
    from omegaconf import OmegaConf

    cfg = OmegaConf.create(cfg)
    assert lr_multiplier(1, cfg, 10, position=9.0) == pytest.approx(2 / 3)  # warm-up counts steps
    assert lr_multiplier(5, cfg, 10, position=2.0) == pytest.approx(1.0)  # nothing of the decay spent yet
    assert lr_multiplier(5, cfg, 10, position=10.0) == pytest.approx(0.1)  # budget spent: the floor
    assert lr_multiplier(5, cfg, 10, position=6.0) == lr_multiplier(6, cfg, 10)


def final_work(run: Path) -> dict:
    logged = [r for r in records(run) if "loss" in r]
    return {**logged[-1], "step_flops": logged[-1]["flops"] - logged[-2]["flops"]}


@pytest.mark.soak  # CI: a shorter test covers the same promise; run with `pytest -m soak`
def test_two_objectives_with_one_flops_budget_stop_within_a_step_of_it(tmp_path: Path) -> None:
    """clm in one launch; mlm in two (the second resumes with the full budget): each stops within one step
    past the budget, the resumed one counting what its first launch spent."""
    ends = {}
    mlm = tmp_path / "mlm"
    first = run_lmpt(*ARGS, "objective=mlm", "trainer.budget=1.2e10flops", f"hydra.run.dir={mlm}", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    first_end = final_work(mlm)
    assert first_end["flops"] >= 1.2e10
    for objective, where in (("clm", "hydra.run.dir"), ("mlm", "trainer.resume")):
        run = tmp_path / objective
        result = run_lmpt(
            *ARGS, f"objective={objective}", f"trainer.budget={FLOPS_BUDGET:g}flops", f"{where}={run}", cwd=tmp_path
        )
        assert result.returncode == 0, result.stderr
        assert "budget: 2.500e+10 FLOPs" in result.stdout
        end = ends[objective] = final_work(run)
        assert FLOPS_BUDGET <= end["flops"] < FLOPS_BUDGET + end["step_flops"]
        cfg = OmegaConf.load(run / "config.yaml")  # the schedule was laid over the budget: it ends at the floor
        assert end["lr"] == pytest.approx(cfg.scheduler.min_lr_ratio * cfg.optimizer.lr)
        logged = [r for r in records(run) if "loss" in r]
        assert [r["step"] for r in logged] == list(range(1, len(logged) + 1))
        for key in ("tokens", "loss_tokens", "flops"):  # cumulative counts, growing every step
            assert all(a[key] < b[key] for a, b in zip(logged, logged[1:], strict=False))
        evals = [r for r in records(run) if "val_loss" in r]
        assert ("val_fixed_loss" in evals[-1]) == (objective == "mlm")
    assert ends["mlm"]["step"] > first_end["step"]
    # mlm's head runs on ~15% of the positions, so its steps are cheaper and it takes more of them
    assert ends["mlm"]["step_flops"] < ends["clm"]["step_flops"] and ends["mlm"]["step"] > ends["clm"]["step"]
    assert 0.1 < ends["mlm"]["loss_tokens"] / ends["mlm"]["tokens"] < 0.2
    assert ends["clm"]["loss_tokens"] == ends["clm"]["tokens"]

    plan = run_lmpt(
        *ARGS, "objective=mlm", f"trainer.budget={FLOPS_BUDGET:g}flops", "trainer.dry_run=true", cwd=tmp_path
    )
    assert plan.returncode == 0, plan.stderr
    planned = int(re.search(r"max_steps\s*│\s*([\d,]+) \(derived", plan.stdout).group(1).replace(",", ""))
    assert abs(planned - ends["mlm"]["step"]) <= 1


@pytest.mark.soak
def test_a_minutes_budget_ends_when_its_time_is_spent(tmp_path: Path) -> None:
    run = tmp_path / "run"
    result = run_lmpt(*ARGS, "trainer.budget=0.03min", f"hydra.run.dir={run}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    (checkpoint,) = (run / "checkpoints").iterdir()
    work = torch.load(checkpoint / "trainer.pt", weights_only=True)["work"]
    assert work["seconds"] >= 1.8
    assert work["seconds"] < 1.8 + 10  # one step past the budget at most, on a busy machine


def test_an_epochs_budget_is_a_step_count_of_passes_and_needs_the_texts_size() -> None:
    cost = StepCost(tokens=1024, flops=1e9, seconds=0.1)
    assert plan_length("4epochs", 200, cost, epoch_steps=9.77).max_steps == 40  # ceil(39.08)
    assert plan_length("2epochs", 200, cost, epoch_steps=10.0).max_steps == 20  # whole passes: no extra step
    assert plan_length("4epochs", 200, cost, epoch_steps=9.77).budget is None  # the schedule follows the steps
    assert plan_length("4epochs", 200, cost, epoch_steps=99.7).rounding is None  # 399 steps, 4.002 epochs: within 1%
    assert "40 step(s) train 4.09 epochs" in plan_length("4epochs", 200, cost, epoch_steps=9.77).rounding
    assert plan_length("2epochs", 200, cost, epoch_steps=10.0).rounding is None
    # whole steps far from the epochs asked are said: 0.001 of an epoch of 7.7 steps is one step, 0.13 epochs
    assert plan_length("0.001epochs", 200, cost, epoch_steps=7.7).rounding == (
        "trainer.budget=0.001epochs buys whole steps: 1 step(s) train 0.13 epochs of this text (a step is 0.13 "
        "epochs at this batch and sequence length)"
    )
    assert "1 step(s) train 4 epochs" in plan_length("1epochs", 200, cost, epoch_steps=0.25).rounding
    with pytest.raises(LmptError, match=r"^trainer.budget=4epochs counts passes over the training text, whose size"):
        plan_length("4epochs", 200, cost)


def test_an_epochs_budget_trains_that_many_passes_over_the_unique_tokens(tmp_path: Path) -> None:
    """data.unique_tokens=3000 at 2 epochs: ceil(2 x 3000 / (8 examples x 65 corpus tokens)) = 12 steps, and the
    dry-run plan says the same before anything is tokenised."""
    run = tmp_path / "run"
    keys = [*ARGS, "data.unique_tokens=3000", "trainer.budget=2epochs"]
    plan = run_lmpt(*keys, "trainer.dry_run=true", cwd=tmp_path)
    assert plan.returncode == 0, plan.stderr
    assert re.search(r"max_steps\s+│ 12 \(derived: the passes", plan.stdout)
    done = run_lmpt(*keys, f"hydra.run.dir={run}", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert max(r["step"] for r in records(run)) == 12
    assert "1.3 epochs" not in done.stdout and "2.08 epochs of the 3,000 train tokens" in done.stdout
    said = "trainer.budget=2epochs buys whole steps: 12 step(s) train 2.08 epochs"
    assert said in " ".join(plan.stdout.split()) and said in " ".join(done.stdout.split())


def test_a_bare_number_is_refused_naming_the_missing_unit() -> None:
    with pytest.raises(LmptError, match=r"^trainer.budget=3e\+12 names no unit: write an amount and a unit"):
        parse_budget("3000000000000.0")  # what Hydra makes of trainer.budget=3e12


def test_an_explicit_max_steps_beside_a_budget_is_refused(tmp_path: Path) -> None:
    """Both set the run's length: one line, exit 2, no run directory (a max_steps from conf/ alone is fine)."""
    run = tmp_path / "run"
    done = run_lmpt(*ARGS, "trainer.max_steps=50", "trainer.budget=2e10flops", f"hydra.run.dir={run}", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        "lmpt: error: trainer.max_steps=50 and trainer.budget=2e10flops both set how long the run trains: "
        "the budget derives max_steps; drop trainer.max_steps (or trainer.budget)\n"
    )
    assert not run.exists()
    refuse_two_lengths(300, "2e10flops", {"trainer.budget"})  # conf's max_steps: the budget derives it
    refuse_two_lengths(50, None, {"trainer.max_steps", "trainer.budget"})  # budget=null: max_steps counts
    with pytest.raises(LmptError, match=r"^trainer.max_steps=7 and trainer.budget=1Mtokens both set"):
        refuse_two_lengths(7, "1Mtokens", {"trainer.max_steps"})
