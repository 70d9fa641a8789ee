"""Bad files are refused in one line naming the file and what to do, whatever their format."""

from __future__ import annotations

import gzip
import json
import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from lmpt.config.schema import TokenizerConfig
from lmpt.data.readers import streams
from lmpt.data.sources import iter_documents, resolve_paths
from lmpt.errors import LmptError
from lmpt.tokenizer.train import train_model

TEXT = "".join(f"Line {i} of a corpus. It has two sentences.\n" for i in range(2000)).encode()


def _read(path: Path) -> list[list[str]]:
    return list(iter_documents([path], "auto", "text"))


def test_parquet_without_the_text_column_names_its_columns(tmp_path: Path) -> None:
    path = tmp_path / "web.parquet"
    pq.write_table(pa.table({"url": ["u"], "content": ["c"]}), path)
    with pytest.raises(LmptError, match=r"web.parquet has no column 'text' \(its columns: url, content\): set data"):
        _read(path)
    pq.write_table(pa.table({"text": [1, 2]}), path)
    with pytest.raises(LmptError, match=r"web.parquet: column 'text' holds int64, not text"):
        _read(path)
    path.write_bytes(b"PAR1 not really")
    with pytest.raises(LmptError, match=r"web.parquet is not a readable parquet file"):
        _read(path)


@pytest.mark.parametrize("name", ["c.txt.gz", "c.jsonl.zst", "c.txt.zst"])
def test_corrupt_or_truncated_compression_names_the_file(name: str, tmp_path: Path) -> None:
    compression = Path(name).suffix
    text = (
        TEXT if ".txt" in name else b"".join(json.dumps({"text": f"Record {i}."}).encode() + b"\n" for i in range(9000))
    )
    whole = gzip.compress(text) if compression == ".gz" else zstandard.ZstdCompressor().compress(text)
    (tmp_path / "truncated").mkdir()
    (tmp_path / "truncated" / name).write_bytes(whole[: len(whole) // 2])
    (tmp_path / "garbage").mkdir()
    (tmp_path / "garbage" / name).write_bytes(whole[:40] + bytes(range(256)) * 8)
    for path in (tmp_path / "truncated" / name, tmp_path / "garbage" / name):
        with pytest.raises(LmptError, match=rf"{path.parent.name}/{name} is not a valid {compression} file .*corrupt"):
            _read(path)


def test_zstd_frames_are_read_across(tmp_path: Path) -> None:
    """Files written in several frames (pzstd, appended streams) read whole; only a cut frame is refused."""
    path = tmp_path / "frames.txt.zst"
    zstd = zstandard.ZstdCompressor()
    path.write_bytes(zstd.compress(b"First frame.\n\n") + zstd.compress(b"Second frame.\n"))
    assert _read(path) == [["First frame."], ["Second frame."]]


def test_a_jsonl_line_that_is_not_json_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "dolma.jsonl.gz"
    path.write_bytes(gzip.compress(b'{"text": "fine"}\n\n{"text": broken}\n'))
    with pytest.raises(LmptError, match=r"dolma.jsonl.gz:3 is not valid JSON .*fix or remove that line"):
        _read(path)


def test_invalid_utf8_late_in_a_file_names_file_and_byte_even_in_tokenizer_training(tmp_path: Path) -> None:
    path = tmp_path / "late.txt.zst"
    path.write_bytes(zstandard.ZstdCompressor().compress(TEXT + b"caf\xe9\n"))
    expected = rf"late.txt.zst is not valid UTF-8 at byte {len(TEXT) + 3} \(line 2001\): convert it to UTF-8"
    with pytest.raises(LmptError, match=expected):
        _read(path)
    # SentencePiece reads the text through an iterator: its failure must still name the real cause
    with pytest.raises(LmptError, match=expected):
        train_model(TokenizerConfig(vocab_size=300), lambda: iter_documents([path], "auto", "text"))


def test_a_line_too_long_is_refused_with_its_number(tmp_path: Path) -> None:
    path = tmp_path / "one-line.txt"
    path.write_bytes(TEXT + b"x" * (streams.MAX_LINE_BYTES + 10))  # no newline anywhere after the text
    with pytest.raises(LmptError, match=rf"one-line.txt: line 2001 \(at byte {len(TEXT)}\) is longer than 16 MiB"):
        _read(path)


def test_only_regular_files_are_read(tmp_path: Path) -> None:
    """A glob or a path naming a device would be read forever: refused at once."""
    result: list[BaseException] = []

    def resolve(patterns: list[str]) -> None:
        try:
            resolve_paths(patterns, tmp_path)
        except LmptError as e:
            result.append(e)

    for patterns in (["/dev/zer[o]"], ["/dev/zero"]):
        worker = threading.Thread(target=resolve, args=(patterns,), daemon=True)
        worker.start()
        worker.join(timeout=10)
        assert not worker.is_alive(), f"resolving {patterns} hung"
        assert "/dev/zero (from data path" in str(result.pop()) and not result


def _null_row_files(directory: Path) -> dict[str, Path]:
    """The same three records, the second with a null text, in every record format."""
    rows = ["First record. It is fine.", None, "Third record."]
    table = pa.table({"text": pa.array(rows, pa.string())})
    files = {"jsonl": directory / "c.jsonl", "parquet": directory / "c.parquet", "arrow": directory / "c.arrow"}
    files["jsonl"].write_text("".join(json.dumps({"text": t}) + "\n" for t in rows))
    pq.write_table(table, files["parquet"], row_group_size=1)  # the null in a batch of its own
    with pa.OSFile(str(files["arrow"]), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table, max_chunksize=2)
    return files


@pytest.mark.parametrize("fmt", ["jsonl", "parquet", "arrow"])
def test_a_null_text_is_refused_naming_file_and_record_in_every_format(tmp_path: Path, fmt: str) -> None:
    path = _null_row_files(tmp_path)[fmt]
    with pytest.raises(LmptError) as refused:
        _read(path)
    where = f"{path}:2" if fmt == "jsonl" else f"{path}, record 2"  # a JSONL record is a line
    assert str(refused.value) == (
        f"{where} has no string field 'text' (it is null): remove that record, or set data.text_field to the "
        "field holding the text"
    )
