"""Numbers that cannot train are refused (issue 12, point 5): a non-finite setting at start-up, naming the key;
weights gone non-finite are never checkpointed nor reported completed; metrics.jsonl stays strict JSON and
its readers (lmpt-compare's) cope with the nulls that stand for non-finite values."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from golden import BASE, describe, run
from omegaconf import OmegaConf

from lmpt.config.validate import refuse_nonfinite
from lmpt.errors import LmptError
from lmpt.report.runs import read_run
from lmpt.rundir.log import LOG_FILE
from lmpt.train.metrics import strict_json


def strict_records(path: Path) -> list[dict]:
    """metrics.jsonl read by a strict parser: a bare NaN or Infinity fails it."""

    def refuse(constant: str) -> None:
        raise AssertionError(f"{path} holds a bare {constant}")

    return [json.loads(line, parse_constant=refuse) for line in path.read_text().splitlines()]


def test_a_nonfinite_setting_is_refused_at_start_up(tmp_path: Path) -> None:
    result = run(tmp_path / "run", [*BASE, "optimizer.lr=inf"])
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and lines == ["lmpt: error: optimizer.lr=inf is invalid: it must be a finite number"]
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("key", "shown"),
    [
        ("optimizer.lr", "optimizer.lr"),
        ("objective.mask_prob", "objective.mask_prob"),
        ("optimizer.betas.1", r"optimizer.betas\[1\]"),
        ("model.rope_theta", "model.rope_theta"),
    ],
)
def test_every_float_setting_must_be_finite(key: str, shown: str) -> None:
    cfg = OmegaConf.create(
        {
            "optimizer": {"lr": 1e-3, "betas": [0.9, 0.95]},
            "objective": {"mask_prob": 0.15},
            "model": {"rope_theta": 1e4},
        }
    )
    OmegaConf.update(cfg, key, float("nan"))
    with pytest.raises(LmptError, match=rf"^{shown}=nan is invalid: it must be a finite number$"):
        refuse_nonfinite(cfg)


def test_nonfinite_weights_are_never_saved_nor_reported_completed(tmp_path: Path) -> None:
    """optimizer.lr=1e39 is a finite setting, but in float32 the first step already makes the weights inf."""
    run_dir = tmp_path / "run"
    result = run(run_dir, [*BASE, "optimizer=adamw", "optimizer.lr=1e39", "scheduler.warmup_steps=0"])
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, describe(result)
    assert "the weights are non-finite at step 4" in lines[0] and "lower optimizer.lr" in lines[0], lines[0]
    assert not (run_dir / "model.safetensors").exists() and not list((run_dir / "checkpoints").glob("step_*"))
    status = json.loads((run_dir / "status.json").read_text())
    assert status["status"] == "failed" and status["step"] == 4, status

    records = strict_records(run_dir / "metrics.jsonl")
    skipped = [r for r in records if "grad_norm" in r and "loss" not in r]
    assert [r["step"] for r in skipped] == [2, 3, 4] and all(r["grad_norm"] is None for r in skipped), skipped
    log = (run_dir / LOG_FILE).read_text()
    assert "step 2: non-finite gradient, step skipped" in log and lines[0] in log

    summary = read_run(run_dir)  # what lmpt-compare shows
    assert summary.status.startswith("failed: the weights are non-finite"), summary.status
    assert summary.step == 4


def test_strict_json_writes_null_for_nonfinite_values() -> None:
    line = strict_json({"step": 3, "loss": 6.5, "grad_norm": float("nan"), "val_ppl": float("inf")})
    assert json.loads(line) == {"step": 3, "loss": 6.5, "grad_norm": None, "val_ppl": None}
    assert "NaN" not in line and "Infinity" not in line
