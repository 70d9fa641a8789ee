"""What the training console and status.json say: throughput that a resume does not inflate, readable rates for a slow
run, an ETA that follows a time budget, wall_s that covers train_s, and the held-out bits per byte."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from golden import BASE, interrupted_run, run
from runner import records, run_lmpt

from lmpt.batch import IGNORE, Batch
from lmpt.config.budget import Budget
from lmpt.objectives.measure import Measure
from lmpt.train.budget import RunLength
from lmpt.train.display import Display, format_record
from lmpt.train.metrics import bits_per_byte, held_out_sizes, with_bits_per_byte

FAST = {"LMPT_TEST_FAST_PEAK": "1"}  # the fault runner without faults: no CPU matmul peak measurement
ARGS = [
    *[a for a in BASE if not a.startswith(("trainer.max_steps=", "trainer.eval_every="))],
    "trainer.max_steps=8",
    "trainer.eval_every=0",
]


@pytest.mark.parametrize(
    ("rate", "shown"),
    [
        (9.5, "9.5"),
        (10.4, "10"),
        (950, "950"),
        (999.7, "1k"),
        (1600, "1.6k"),
        (15_800, "16k"),
        (160_000, "160k"),
        (1_600_000, "1.6M"),
    ],
)
def test_throughput_keeps_two_significant_digits(rate: float, shown: str) -> None:
    assert format_record({"tokens_per_s": rate}) == f"{shown} tok/s"  # a slow run's 10 tok/s was "0.0k tok/s"


def test_the_eta_of_a_time_budget_is_the_training_time_it_has_left() -> None:
    length = RunLength(max_steps=10_000, budget=Budget(2.0, "minutes"))  # a step count derived at an assumed speed
    shown = Display(length.max_steps, length)
    shown.start(0)
    length.work.seconds = 30.0
    assert shown.eta_seconds(5) == pytest.approx(90.0)  # 2 minutes less 30 s spent, whatever the steps left
    assert shown.eta(5) == "1m30s"
    length.work.seconds = 200.0
    assert shown.eta(6) == "0m00s"


def test_the_eta_of_a_token_budget_follows_the_share_spent() -> None:
    length = RunLength(max_steps=3, budget=Budget(1000, "tokens"))  # the loader, not max_steps, ends this run
    shown = Display(length.max_steps, length)
    shown.start(0)
    shown.started -= 10.0  # ten seconds into the launch
    length.work.tokens = 250
    assert shown.eta_seconds(1) == pytest.approx(30.0, rel=0.01)  # a quarter in 10 s: three quarters left, 30 s


def test_without_a_budget_the_eta_counts_steps() -> None:
    shown = Display(100)
    shown.start(0)
    shown.started -= 10.0
    assert shown.eta_seconds(10) == pytest.approx(90.0, rel=0.01)


def test_bits_per_byte_of_the_held_out_windows_counts_the_bytes_of_the_scored_tokens() -> None:
    sizes = torch.tensor([0, 1, 2, 3, 4])  # bytes each piece spells; 0: a reserved token (eos)
    a = Batch(input_ids=torch.zeros(1, 4, dtype=torch.long), labels=torch.tensor([[1, 2, IGNORE, 4]]))
    b = Batch(input_ids=torch.zeros(1, 4, dtype=torch.long), labels=torch.tensor([[0, 3, IGNORE, IGNORE]]))
    held = held_out_sizes({"": [a, b]}, sizes)
    assert held == {"": (5, 10)}  # five scored tokens spelling 1 + 2 + 4 + 0 + 3 bytes
    record = with_bits_per_byte({"val_loss": 2.0, "val_acc": 0.5}, held, Measure(SimpleNamespace(perplexity_of="loss")))
    assert record["val_bpb"] == pytest.approx(2.0 * 5 / (math.log(2) * 10))
    assert bits_per_byte(2.0 * 5, 10) == record["val_bpb"] and math.isnan(bits_per_byte(1.0, 0))
    mixed = with_bits_per_byte(
        {"val_mlm_loss": 1.0, "val_mlm_loss/a": 1.0, "val_mlm_loss/b": 3.0},
        {"a": (4, 8), "b": (2, 2)},
        Measure(SimpleNamespace(perplexity_of="mlm_loss")),
    )
    assert mixed["val_bpb/a"] == pytest.approx(4 / (8 * math.log(2)))
    assert mixed["val_bpb/b"] == pytest.approx(6 / (2 * math.log(2)))


def test_a_resumed_run_times_its_first_interval_and_its_wall_time_over_every_launch(tmp_path: Path) -> None:
    killed = interrupted_run(tmp_path, ARGS, [{"LMPT_TEST_KILL_AFTER_BACKWARD": "6", **FAST}], final_env=FAST)
    logged = {r["step"]: r for r in records(killed) if "tokens_per_s" in r}
    after = logged[5]  # the first interval after resuming from step 4
    # its rate covers the tokens since the resume (one step), not every token the run has seen (five steps)
    assert after["tokens_per_s"] * after["interval_s"] == pytest.approx(after["tokens"] - logged[4]["tokens"], rel=1e-6)
    assert logged[6]["tokens_per_s"] * logged[6]["interval_s"] == pytest.approx(
        logged[6]["tokens"] - logged[5]["tokens"], rel=1e-6
    )
    status = json.loads((killed / "status.json").read_text())
    trainer = torch.load(killed / "checkpoints" / "step_00000008" / "trainer.pt", weights_only=True)
    assert status["train_s"] <= status["wall_s"] and trainer["work"]["seconds"] <= trainer["wall_seconds"]

    (evaluation,) = [r for r in records(killed) if "val_loss" in r]
    assert evaluation["val_bpb"] == pytest.approx(status["val_bpb"]) and 0 < status["val_bpb"] < 20
    assert status["val_loss"] == pytest.approx(evaluation["val_loss"])


def test_a_launch_that_only_closes_a_trained_run_keeps_its_wall_time(tmp_path: Path) -> None:
    trained = tmp_path / "run"
    first = run(trained, [*ARGS, "trainer.max_steps=3", "trainer.ckpt_every=3"], **FAST)
    assert first.returncode == 0, first.stderr[-2000:]
    before = json.loads((trained / "status.json").read_text())
    again = run_lmpt(f"trainer.resume={trained}", cwd=tmp_path)  # nothing left to train
    assert again.returncode == 0, again.stderr[-2000:]
    status = json.loads((trained / "status.json").read_text())
    assert status["train_s"] == before["train_s"] <= status["wall_s"]  # it was this launch's second alone
    carried = torch.load(trained / "checkpoints" / "step_00000003" / "trainer.pt", weights_only=True)["wall_seconds"]
    assert before["train_s"] <= carried <= status["wall_s"]  # the first launch's loop, up to its final checkpoint
    assert "val bits per byte" in first.stdout and "wall time / training" in first.stdout


def test_the_eval_line_leaves_out_an_exact_likelihoods_zero_standard_error() -> None:
    from lmpt.train.display import format_eval

    exact = format_eval({"step": 40, "val_loss": 5.1231, "val_bits_per_token": 7.391, "val_bits_per_token_stderr": 0.0})
    bound = format_eval({"step": 40, "val_bits_per_token": 9.067, "val_bits_per_token_stderr": 0.0063})
    assert "stderr" not in exact and "val_bits_per_token 7.3910" in exact
    assert "val_bits_per_token_stderr 0.0063" in bound


def test_an_80_column_terminal_keeps_the_step_and_the_eta_and_cuts_the_metrics(monkeypatch) -> None:
    import io
    import re

    from rich.console import Console

    import lmpt.train.display as display

    out = io.StringIO()
    monkeypatch.setattr(display, "console", Console(file=out, width=80, force_terminal=True, color_system=None))
    shown = display.RichDisplay(1000)
    shown.start(0)
    shown.log(123, {"step": 123, "loss": 5.1234, "ppl": 167.9, "acc": 0.17, "lr": 0.02, "tokens_per_s": 5000.0})
    shown.advance(123)
    shown.progress.refresh()
    shown.close()
    last = [line for line in re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.getvalue()).splitlines() if line.strip()][-1]
    assert "123/1000" in last and "eta " in last and "loss 5.1234" in last and len(last) <= 80


def test_piped_output_prints_tables_whole(tmp_path: Path) -> None:
    """Under a pipe or nohup, rich would squeeze tables to 80 columns and cut cells with "…" (issue 63, point 14):
    the plan, the closing summary and its run directory print whole."""
    run_dir = tmp_path / ("a-run-directory-whose-name-alone-is-longer-than-the-eighty-columns-a-pipe-gets" + "-x" * 10)
    done = run_lmpt(*BASE, "trainer.max_steps=2", "trainer.eval_every=0", f"hydra.run.dir={run_dir}", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "…" not in done.stdout
    assert any(str(run_dir) in line and "run directory" in line for line in done.stdout.splitlines())
    plan = run_lmpt(*BASE, "trainer.dry_run=true", cwd=tmp_path)
    assert plan.returncode == 0 and "…" not in plan.stdout
    assert any("estimated time" in line and "MFU" in line for line in plan.stdout.splitlines())  # its row unwrapped
