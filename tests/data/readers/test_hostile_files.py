"""Hostile training files (issue 32): JSON nested deeper than Python recurses, an integer longer than Python
converts, parquet columns of timestamps, decimals or bytes. Each is one LmptError line naming the file."""

from __future__ import annotations

import datetime
import decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lmpt.data.sources import iter_documents
from lmpt.errors import LmptError

DEEP = "[" * 200_000 + "]" * 200_000
HUGE = "1" * 5_000


def _refusal(path: Path) -> str:
    with pytest.raises(LmptError) as info:
        list(iter_documents([path], "auto", "text"))
    message = str(info.value)
    assert "\n" not in message and str(path) in message, message
    return message


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (f'{{"text": "ok", "x": {DEEP}}}', "nested too deeply"),
        (f'{{"text": "ok", "x": {HUGE}}}', "integer of more than"),
        (f'{{"text": {HUGE}}}', "integer of more than"),
    ],
)
def test_hostile_jsonl_lines_are_one_line(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "web.jsonl"
    path.write_text('{"text": "a first fine line."}\n' + line + "\n", encoding="utf-8")
    assert f"{path}:2" in _refusal(path) and message in _refusal(path)


@pytest.mark.parametrize(
    "column",
    [
        pa.array([datetime.datetime(2024, 1, 1)], pa.timestamp("us")),
        pa.array([decimal.Decimal("1.5")], pa.decimal128(5, 2)),
        pa.array([b"\xff\xfe bytes"], pa.binary()),
    ],
)
def test_parquet_columns_that_are_not_text_are_one_line(tmp_path: Path, column: pa.Array) -> None:
    path = tmp_path / "web.parquet"
    pq.write_table(pa.table({"text": column}), path)
    assert "not text" in _refusal(path)
