"""Task files at the edges (issue 32): hostile JSON and parquet in fine-tuning and zero-shot files, and the rough
edges of CSV/TSV (a byte-order mark, an endless line, a repeated header, a header read as data, true/false mixed
with 1/0). Each refusal is one LmptError line naming the file."""

from __future__ import annotations

import datetime
import decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lmpt.downstream.bundled import resolve_task
from lmpt.downstream.labelled import label_order
from lmpt.downstream.labelled_files import Example, TaskData, read_examples
from lmpt.downstream.zero_shot_files import read_choice_task
from lmpt.errors import LmptError

DEEP = "[" * 200_000 + "]" * 200_000
HUGE = "1" * 5_000
HOSTILE_LINES = {
    "deep": (f'{{"text": "a", "label": {DEEP}}}', "nested too deeply"),
    "huge": (f'{{"text": "a", "label": {HUGE}}}', "integer of more than"),
}


def _write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def _refused(path: str, **fields: object) -> str:
    data = TaskData(train=path, dev="", **fields)  # type: ignore[arg-type]
    with pytest.raises(LmptError) as info:
        read_examples(data.train, "train", data)
    message = str(info.value)
    assert "\n" not in message and Path(path).name in message, message
    return message


@pytest.mark.parametrize("case", list(HOSTILE_LINES))
def test_hostile_json_in_a_fine_tuning_file_is_one_line(tmp_path: Path, case: str) -> None:
    line, message = HOSTILE_LINES[case]
    assert message in _refused(_write(tmp_path, "t.jsonl", '{"text": "a", "label": 0}\n' + line + "\n"))


@pytest.mark.parametrize("case", list(HOSTILE_LINES))
def test_hostile_json_in_a_zero_shot_file_is_one_line(tmp_path: Path, case: str) -> None:
    line, message = HOSTILE_LINES[case]
    path = _write(tmp_path, "mc.jsonl", line.replace('"text"', '"context"') + "\n")
    with pytest.raises(LmptError, match=f"mc.jsonl:1 .*{message}") as info:
        read_choice_task(path)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("text", "label", "message"),
    [
        (pa.array(["a"]), pa.array([datetime.datetime(2024, 1, 1)], pa.timestamp("us")), "is not a class"),
        (pa.array(["a"]), pa.array([decimal.Decimal("1.5")], pa.decimal128(5, 2)), "is not a class"),
        (pa.array([b"\xff bytes"], pa.binary()), pa.array([1]), "not text"),
    ],
)
def test_parquet_labels_and_texts_of_other_types_are_one_line(tmp_path: Path, text, label, message: str) -> None:
    pq.write_table(pa.table({"text": text, "label": label}), tmp_path / "t.parquet")
    assert message in _refused(str(tmp_path / "t.parquet"))


def test_a_huge_integer_label_in_a_csv_is_a_class_like_any_other() -> None:
    assert label_order([HUGE, "2", "b"]) == ["2", HUGE, "b"]


def test_a_byte_order_mark_is_not_part_of_the_first_column_name(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_bytes("\ufefftext,label\nfine day,1\n".encode())
    (tmp_path / "t.jsonl").write_bytes('\ufeff{"text": "fine day", "label": 1}\n'.encode())
    for name in ("t.csv", "t.jsonl"):
        data = TaskData(train=str(tmp_path / name), dev="")
        assert read_examples(data.train, "train", data) == [Example("fine day", None, "1")], name


def test_an_endless_csv_line_is_refused_before_it_is_held(tmp_path: Path) -> None:
    path = _write(tmp_path, "t.csv", "text,label\n" + ",".join(["x" * 1000] * 3000) + "\n")
    assert "t.csv:2 is longer than" in _refused(path)


def test_a_repeated_header_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, "t.csv", "text,label,text\na,1,b\n")
    assert "names the column 'text' twice" in _refused(path)
    ok = _write(tmp_path, "u.csv", "text,label,note,note\na,1,x,y\n")  # an unused repeated column is harmless
    assert read_examples(ok, "train", TaskData(train=ok, dev="")) == [Example("a", None, "1")]


def test_column_numbers_on_a_headed_file_are_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, "t.csv", "sentence,label\na fine day,1\na grey day,0\nsun,1\n")
    assert "looks like a header" in _refused(path, text_field="0", label_field="1")
    data = TaskData(train=path, dev="", text_field="0", label_field="1", header=True)
    assert [e.label for e in read_examples(path, "train", data)] == ["1", "0", "1"]
    headless = _write(tmp_path, "u.csv", "a fine day,1\na grey day,0\n")  # a short headerless file still reads
    data = TaskData(train=headless, dev="", text_field="0", label_field="1")
    assert [e.label for e in read_examples(headless, "train", data)] == ["1", "0"]


def test_true_false_mixed_with_integers_is_refused() -> None:
    from lmpt.downstream.labelled import check_labels_agree

    examples = [Example("a", None, label) for label in ("true", "false", "1", "0")]
    with pytest.raises(LmptError, match="mixes true/false labels with integer labels") as info:
        check_labels_agree(examples, "t.jsonl")
    assert "\n" not in str(info.value)
    check_labels_agree([Example("a", None, label) for label in ("true", "false")], "t.jsonl")
    check_labels_agree([Example("a", None, label) for label in ("1", "0", "2")], "t.jsonl")


def test_a_directory_is_named_a_directory(tmp_path: Path) -> None:
    data = TaskData(train=str(tmp_path), dev="")
    with pytest.raises(LmptError, match="is a directory"):
        read_examples(data.train, "train", data)
    with pytest.raises(LmptError, match="is a directory"):
        resolve_task(str(tmp_path))
