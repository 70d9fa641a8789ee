"""Task files as they ship: GLUE's TSV files (SST-2, CoLA, MRPC, RTE; a few rows typed out with their real
columns), JSON Lines plain and compressed, CSV and parquet; and the one-line refusals of bad ones."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lmpt.downstream.labelled_files import Example, TaskData, read_examples
from lmpt.errors import LmptError

SST2 = "sentence\tlabel\nhide new secretions from the parental units \t0\nthe greatest musicians \t1\n"
COLA = (  # no header: source, label, original annotation, sentence
    "gj04\t1\t\tOur friends won't buy this analysis, let alone the next one we propose.\n"
    "gj04\t0\t*\tThey drank the pub.\n"
    'cj99\t1\t\tThe "more you eat, the more you want.\n'
)
MRPC = (
    "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
    '1\t702876\t702977\tAmrozi accused his brother , whom he called " the witness " , of deliberately distorting '
    'his evidence .\tReferring to him as only " the witness " , Amrozi accused his brother of deliberately '
    "distorting his evidence .\n"
    "0\t2108705\t2108831\tYucaipa owned Dominick 's before selling the chain to Safeway in 1998 for $ 2.5 billion ."
    "\tYucaipa bought Dominick 's in 1995 for $ 693 million and sold it to Safeway for $ 1.8 billion in 1998 .\n"
)
RTE = (
    "index\tsentence1\tsentence2\tlabel\n"
    "0\tNo Weapons of Mass Destruction Found in Iraq Yet.\tWeapons of Mass Destruction Found in Iraq.\t"
    "not_entailment\n"
    "1\tA place of sorrow, after Pope John Paul II died, became a place of celebration.\tPope Benedict XVI is the "
    "new leader of the Roman Catholic Church.\tentailment\n"
)


def _write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_sst2_reads_by_column_name(tmp_path: Path) -> None:
    data = TaskData(train=_write(tmp_path, "train.tsv", SST2), dev="", text_field="sentence")
    assert read_examples(data.train, "train", data) == [
        Example("hide new secretions from the parental units ", None, "0"),
        Example("the greatest musicians ", None, "1"),
    ]


def test_cola_reads_headerless_by_column_number_and_keeps_quotes(tmp_path: Path) -> None:
    data = TaskData(train=_write(tmp_path, "in_domain_train.tsv", COLA), dev="", text_field="3", label_field="1")
    examples = read_examples(data.train, "train", data)
    assert [e.label for e in examples] == ["1", "0", "1"]
    assert examples[2].text == 'The "more you eat, the more you want.'  # QUOTE_NONE: an odd quote is text


def test_mrpc_reads_a_pair_with_odd_column_names(tmp_path: Path) -> None:
    data = TaskData(
        train=_write(tmp_path, "msr_paraphrase_train.tsv", MRPC),
        dev="",
        text_field="#1 String",
        pair_field="#2 String",
        label_field="Quality",
    )
    first, second = read_examples(data.train, "train", data)
    assert first.text.startswith("Amrozi accused") and first.pair.startswith("Referring to him")
    assert '" the witness "' in first.text and (first.label, second.label) == ("1", "0")


def test_rte_reads_string_labels(tmp_path: Path) -> None:
    data = TaskData(train=_write(tmp_path, "train.tsv", RTE), dev="", text_field="sentence1", pair_field="sentence2")
    assert [e.label for e in read_examples(data.train, "train", data)] == ["not_entailment", "entailment"]


def test_jsonl_gz_csv_and_parquet_read_alike(tmp_path: Path) -> None:
    rows = [{"text": "a fine day", "label": 1}, {"text": "a dull, grey day", "label": 0}, {"text": "ok", "label": 1}]
    with gzip.open(tmp_path / "t.jsonl.gz", "wt", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    _write(tmp_path, "t.csv", 'text,label\na fine day,1\n"a dull, grey day",0\nok,1\n')
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "t.parquet")
    want = [Example("a fine day", None, "1"), Example("a dull, grey day", None, "0"), Example("ok", None, "1")]
    for name in ("t.jsonl.gz", "t.csv", "t.parquet"):
        data = TaskData(train=str(tmp_path / name), dev="")
        assert read_examples(data.train, "train", data) == want, name


def test_boolean_labels_are_classes(tmp_path: Path) -> None:
    data = TaskData(
        train=_write(tmp_path, "boolq.jsonl", '{"text": "q", "label": true}\n{"text": "r", "label": false}\n'), dev=""
    )
    assert [e.label for e in read_examples(data.train, "train", data)] == ["true", "false"]


@pytest.mark.parametrize(
    ("name", "text", "fields", "message"),
    [
        ("t.jsonl", '{"text": "a", "score": 1}\n', {}, "has no field 'label' (it has: text, score)"),
        ("t.jsonl", '{"text": 7, "label": 1}\n', {}, "field 'text' holds int 7, not text"),
        ("t.jsonl", '{"text": ["a", "b"], "label": 1}\n', {}, "field 'text' holds list"),
        ("t.jsonl", '{"text": "a", "label": 0.5}\n', {}, "is not a class"),
        ("t.jsonl", "\n\n", {}, "holds no examples"),
        ("t.jsonl", "{oops\n", {}, "t.jsonl:1 is not valid JSON"),
        ("t.tsv", SST2, {}, "has no field 'text' (it has: sentence, label)"),
        ("t.tsv", SST2, {"text_field": "sentence", "pair_field": "hypothesis"}, "has no field 'hypothesis'"),
        ("t.txt", "hello\n", {}, "cannot tell its format"),
    ],
)
def test_bad_task_files_are_one_line(tmp_path: Path, name: str, text: str, fields: dict, message: str) -> None:
    data = TaskData(train=_write(tmp_path, name, text), dev="", **fields)
    with pytest.raises(LmptError, match="^.*$") as info:
        read_examples(data.train, "train", data)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    data = TaskData(train=str(tmp_path / "nope.jsonl"), dev="")
    with pytest.raises(LmptError, match=r"data.train=.*nope.jsonl does not exist"):
        read_examples(data.train, "train", data)
