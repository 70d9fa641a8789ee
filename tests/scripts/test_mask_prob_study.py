"""docs/mask_prob_study.md's first table fits a page: scripts/mask_prob_study.py keeps the columns a reader compares,
in the sweep table's order, and leaves the rest to the whole table at the document's end."""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("mask_prob_study", REPO / "scripts" / "mask_prob_study.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_first_table_keeps_only_the_compared_columns_in_order() -> None:
    table = [
        "| run | objective | val_fixed_loss | wall_s | seeds | vs_next | vs_next_holm_p |",
        "| --- | --- | ---: | ---: | --- | --- | ---: |",
        "| objective.mask_prob=0.4 | mlm | 5.5913 | 2m19s | 0, 1, 2 | > p=0.018 | 0.018 |",
    ]
    assert _script().compact_table(table) == [
        "| run | val_fixed_loss | seeds | vs_next |",
        "| --- | ---: | --- | --- |",
        "| objective.mask_prob=0.4 | 5.5913 | 0, 1, 2 | > p=0.018 |",
    ]


def test_the_document_leads_with_a_table_of_a_handful_of_columns() -> None:
    tables = [line for line in (REPO / "docs" / "mask_prob_study.md").read_text().splitlines() if line.startswith("|")]
    assert len(tables[0].split("|")) - 2 <= 9 and "/tmp" not in (REPO / "docs" / "mask_prob_study.md").read_text()
