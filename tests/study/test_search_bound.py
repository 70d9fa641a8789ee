"""A study's search ranks an mdlm trial by its bound over the yardstick's fixed passes of masks (val_bits_per_token,
in nats), not by val_loss, which is one pass's noisy draw of the same bound; other objectives keep val_loss."""

from __future__ import annotations

import json
import math
from pathlib import Path

from lmpt.study.runs import read_trial


def finished_trial(path: Path, objective: str, val_loss: float, bits: float) -> Path:
    path.mkdir(parents=True)
    (path / "config.yaml").write_text(f"objective:\n  name: {objective}\ntrainer:\n  seed: 0\n")
    record = {"step": 40, "val_loss": val_loss, "val_ppl": math.exp(val_loss), "val_bits_per_token": bits}
    (path / "metrics.jsonl").write_text(json.dumps(record) + "\n")
    (path / "status.json").write_text(json.dumps({"status": "completed"}))
    return path


def test_an_mdlm_trial_is_ranked_by_its_yardstick_bound(tmp_path: Path) -> None:
    trial = read_trial(finished_trial(tmp_path / "mdlm", "mdlm", val_loss=6.0, bits=9.0), {"optimizer.lr": "0.01"})
    assert trial.val_loss == 9.0 * math.log(2)


def test_a_clm_trial_keeps_its_val_loss(tmp_path: Path) -> None:
    trial = read_trial(finished_trial(tmp_path / "clm", "clm", val_loss=6.0, bits=9.0), {"optimizer.lr": "0.01"})
    assert trial.val_loss == 6.0
