"""`lmpt model.init_from=RUN` by the real CLI: a new stage (fresh optimizer and schedule, new objective and
data) recorded in config.yaml and metrics.jsonl, resumed bit for bit, and one line for weights that do not fit."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml
from golden import BASE, assert_same, describe, final_weights, golden_run, interrupted_run, records, run, start_golden

from lmpt.train.init_from import read_origin

SHORT = [a if not a.startswith("trainer.max_steps=") else "trainer.max_steps=8" for a in BASE] + ["optimizer=adamw"]
"""AdamW at 1e-3 moves the weights little in 8 steps: the distance a stage ends from its source shows where it began."""
SOURCE = [*SHORT, "objective=clm"]


@pytest.fixture(scope="module")
def source_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """8 clm steps on Shakespeare: the earlier stage."""
    return golden_run(tmp_path_factory.mktemp("source"), SOURCE)


def stage_args(source: Path) -> list[str]:
    """Continue with another objective on another corpus; the architecture comes from the source."""
    keep = [a for a in SHORT if not a.startswith("model.")]
    return [*keep, "objective=prefix", f"model.init_from={source}", "data.paths=[bundled:wikitext-2-valid.txt]"]


def test_stage_starts_from_the_source_and_resumes_bit_for_bit(source_run: Path, tmp_path: Path) -> None:
    args = stage_args(source_run)
    start_golden(tmp_path, args)
    resumed = interrupted_run(tmp_path, args, [{"LMPT_TEST_KILL_AFTER_BACKWARD": "6"}])
    stage = golden_run(tmp_path, args)
    assert_same(stage, resumed, "a stage killed at step 6 and resumed")

    config = yaml.safe_load((stage / "config.yaml").read_text())
    assert config["model"]["init_from"] == str(source_run.resolve()) and config["model"]["stage"] == 2
    assert (config["model"]["d_model"], config["model"]["n_layers"], config["objective"]["name"]) == (64, 2, "prefix")
    assert config["tokenizer"]["model_file"] == str(source_run.resolve() / "tokenizer.model")
    first, *rest = records(stage)
    assert first == {"step": 0, "stage": 2, "init_from": str(source_run.resolve()), "origin": "lmpt", "origin_step": 8}
    assert [r for r in records(resumed) if "stage" in r] == [first]  # written once, kept across the restart
    # fresh schedule: warm-up from zero again
    source_steps = [r for r in records(source_run) if "loss" in r]
    stage_steps = [r for r in rest if "loss" in r]
    assert stage_steps[0]["lr"] == source_steps[0]["lr"] != source_steps[-1]["lr"]
    # started from the source's weights: 8 small steps away from them (independent inits are ~1.4 apart)
    before, after = final_weights(source_run), final_weights(stage)
    distance = sum(float((after[k] - before[k]).norm() ** 2) for k in before) ** 0.5
    assert distance / sum(float(w.norm() ** 2) for w in before.values()) ** 0.5 < 0.3


def test_width_that_does_not_fit_is_one_line_exit_2(source_run: Path, tmp_path: Path) -> None:
    done = run(tmp_path / "wide", [*stage_args(source_run), "model.d_model=128"])
    assert done.returncode == 2, describe(done)
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert "body.embed.tokens.weight has shape [1024, 64], this run's model needs [1024, 128]" in done.stderr
    assert not (tmp_path / "wide").exists()


def test_a_checkpoint_or_a_run_directory_is_a_source(source_run: Path) -> None:
    checkpoint = source_run / "checkpoints" / "step_00000008"
    from_checkpoint, from_run = read_origin(str(checkpoint)), read_origin(str(source_run))
    assert (from_checkpoint.kind, from_checkpoint.step, from_run.step, from_run.stage) == ("lmpt", 8, 8, 1)
    assert from_checkpoint.model_keys["d_model"] == 64 and from_checkpoint.tokenizer_file.name == "tokenizer.model"
    assert all(torch.equal(from_checkpoint.state[k], v) for k, v in from_run.state.items())
