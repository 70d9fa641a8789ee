"""A downstream record kept after a stop during scoring is adopted on resume only when its figures are the ones its
own per-item outcomes give: an edited or torn figure is scored again, never logged as the run's."""

from __future__ import annotations

import json
from pathlib import Path

from lmpt.downstream.records import ScoringProgress, disagrees_with_its_items, record_path


def kept(run_dir: Path, accuracy: float) -> dict | None:
    path = record_path(run_dir, "blimp-fast")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"task": "blimp-fast", "accuracy": accuracy, "accuracy_items": "1000", "n": 4}))
    return ScoringProgress(kept=frozenset({"blimp-fast"})).kept_record(run_dir, "blimp-fast")


def test_a_kept_record_whose_figure_its_items_contradict_is_scored_again(tmp_path: Path) -> None:
    assert kept(tmp_path / "a", 0.25) is not None  # one of four right: its own
    assert kept(tmp_path / "b", 0.99) is None  # edited from 0.25: scored again
    assert "says accuracy 0.99 where its 4 items give 0.25" in disagrees_with_its_items(
        {"accuracy": 0.99, "accuracy_items": "1000"}
    )
    assert disagrees_with_its_items({"accuracy": 0.5, "accuracy_items": "not outcomes"}) == ""
