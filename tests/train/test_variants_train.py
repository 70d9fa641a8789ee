"""The objectives 2025's studies compare train through the real command, and the two new ones resume bit for bit
across what changes over the run (clm-then-mlm's switch, gpt-bert's mixed batch kinds and decaying rate)."""

from __future__ import annotations

from pathlib import Path

import pytest
from golden import BASE, assert_same, golden_run, interrupted_run, start_golden
from runner import SMALL, records, run_lmpt, val_losses


@pytest.mark.parametrize(
    "overrides,arch",
    [
        (["objective=mlm", "objective.mask_prob_schedule=linear"], "an encoder"),
        (["objective=clm-then-mlm", "objective.switch_at=0.25"], "an encoder"),
        (["objective=gpt-bert"], "a decoder"),
    ],
)
def test_variant_trains_and_its_loss_falls(tmp_path: Path, overrides: list[str], arch: str) -> None:
    run = tmp_path / "run"
    result = run_lmpt(
        *SMALL,
        *overrides,
        "trainer.max_steps=40",
        "trainer.eval_every=10",
        "optimizer.lr=3e-3",
        "trainer.sample_tokens=0",
        "model.n_layers=1",
        f"hydra.run.dir={run}",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert f"{overrides[0].split('=')[1]} on {arch}" in result.stdout
    val = val_losses(run)
    assert val[40] < val[10], val
    if "objective=gpt-bert" in overrides:
        assert "val_mntp_loss" in [r for r in records(run) if "val_loss" in r][-1]


def test_clm_then_mlm_resumes_exactly_across_the_switch(tmp_path_factory: pytest.TempPathFactory) -> None:
    # 16 steps, checkpoints every 4: the switch at step 10; killed after step 11, it resumes from step 8's checkpoint
    args = [*BASE, "objective=clm-then-mlm", "objective.switch_at=0.6"]
    gold, tmp = tmp_path_factory.mktemp("gold"), tmp_path_factory.mktemp("killed")
    start_golden(gold, args)
    killed = interrupted_run(tmp, args, [{"LMPT_TEST_KILL_AFTER_BACKWARD": "11"}])
    assert_same(golden_run(gold, args), killed, "clm-then-mlm, SIGKILL after backward 11 (switch at step 10)")


@pytest.mark.soak  # ~50 s: gpt-bert's resume; clm-then-mlm's across its switch runs in CI
def test_gpt_bert_resumes_exactly(tmp_path_factory: pytest.TempPathFactory) -> None:
    args = [*BASE, "objective=gpt-bert", "objective.causal_ratio=0.5"]  # both batch kinds within 16 steps
    gold, tmp = tmp_path_factory.mktemp("gold"), tmp_path_factory.mktemp("killed")
    start_golden(gold, args)
    killed = interrupted_run(tmp, args, [{"LMPT_TEST_KILL_AFTER_BACKWARD": "10"}])
    assert_same(golden_run(gold, args), killed, "gpt-bert, SIGKILL after backward 10")
    kinds = {key for r in records(killed) for key in r if key in ("clm_loss", "mntp_loss")}
    assert kinds == {"clm_loss", "mntp_loss"}
