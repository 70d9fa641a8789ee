"""A weighted mixture (data=mixture: the two bundled corpora) reports validation per source and overall, and a
run killed with SIGKILL and restarted matches an uninterrupted one bit for bit."""

from __future__ import annotations

from pathlib import Path

import pytest
from golden import BASE, assert_same, golden_run, interrupted_run, records, start_golden

ARGS = [*BASE, "data=mixture"]


@pytest.mark.soak  # CI: a shorter test covers the same promise; run with `pytest -m soak`
def test_mixture_killed_and_resumed_is_bitwise_golden_with_per_source_validation(tmp_path: Path) -> None:
    gold = tmp_path / "gold"
    gold.mkdir()
    start_golden(gold, ARGS)
    killed = interrupted_run(tmp_path, ARGS, [{"LMPT_TEST_KILL_AFTER_BACKWARD": "11"}])
    golden = golden_run(gold, ARGS)
    assert_same(golden, killed, "data=mixture, SIGKILL after backward 11")

    evaluations = [r for r in records(golden) if "val_loss" in r]
    assert [r["step"] for r in evaluations] == [8, 16]
    for record in evaluations:
        for name in ("shakespeare", "wikitext"):
            assert record[f"val_ppl/{name}"] > 1 and f"val_loss/{name}" in record
        per_source = sorted([record["val_loss/shakespeare"], record["val_loss/wikitext"]])
        assert per_source[0] <= record["val_loss"] <= per_source[1]  # overall: both sources' held-out windows
    resumed = {r["step"]: r for r in records(killed) if "val_loss" in r}
    assert all(resumed[r["step"]] == r for r in evaluations)  # per-source values too, bit for bit
