"""resolve_paths turns files, directories, globs and bundled names into files; iter_documents reads them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lmpt.data.readers.text import split_sentences
from lmpt.data.sources import bundled_dir, iter_documents, resolve_paths
from lmpt.errors import LmptError


def _write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return path


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    _write(tmp_path / "a.txt", "alpha\n")
    _write(tmp_path / "sub" / "b.md", "beta\n")
    _write(tmp_path / "sub" / "deeper" / "c.jsonl", '{"text": "gamma"}\n')
    _write(tmp_path / "sub" / "skip.bin", b"\x00\x01")
    _write(tmp_path / "sub" / "d.text", "delta\n")
    return tmp_path


def test_file_directory_glob_and_relative_paths(tree: Path) -> None:
    assert resolve_paths(["a.txt"], tree) == [tree / "a.txt"]
    assert resolve_paths([str(tree / "a.txt")], Path("/")) == [tree / "a.txt"]
    found = resolve_paths(["sub"], tree)
    assert found == [tree / "sub" / "b.md", tree / "sub" / "d.text", tree / "sub" / "deeper" / "c.jsonl"]
    assert resolve_paths(["sub/*.md", "*.txt"], tree) == [tree / "sub" / "b.md", tree / "a.txt"]
    assert resolve_paths(["**/*.jsonl"], tree) == [tree / "sub" / "deeper" / "c.jsonl"]
    assert resolve_paths(["a.txt", "*.txt", "."], tree)[0] == tree / "a.txt"  # each file once
    assert len(resolve_paths(["."], tree)) == 4


def test_bundled_corpora(tmp_path: Path) -> None:
    names = ["tinyshakespeare.txt", "wikitext-2-valid.txt", "tinystories-prefix.txt"]
    paths = resolve_paths([f"bundled:{name}" for name in names], tmp_path)
    assert [p.name for p in paths] == names
    assert all(p.parent == bundled_dir().resolve() and p.stat().st_size > 1_000_000 for p in paths)
    with pytest.raises(LmptError, match="data path not found: bundled:nope.txt .*tinyshakespeare.txt"):
        resolve_paths(["bundled:nope.txt"], tmp_path)


def test_missing_and_empty_are_refused(tree: Path) -> None:
    with pytest.raises(LmptError, match="^data path not found: missing.txt"):
        resolve_paths(["missing.txt"], tree)
    with pytest.raises(LmptError, match="data path not found: nothing/\\*.txt"):
        resolve_paths(["nothing/*.txt"], tree)
    (tree / "empty").mkdir()
    _write(tree / "empty" / "x.bin", b"1")
    with pytest.raises(LmptError, match="holds no text files"):
        resolve_paths(["empty"], tree)
    with pytest.raises(LmptError, match="no training text"):
        resolve_paths([], tree)


def test_split_sentences() -> None:
    assert split_sentences("One. Two! Three? Four") == ["One.", "Two!", "Three?", "Four"]
    assert split_sentences("It is 3.5 m long . Yes .") == ["It is 3.5 m long .", "Yes ."]
    assert split_sentences("   ") == []


def test_blank_line_and_auto(tmp_path: Path) -> None:
    f = _write(tmp_path / "t.txt", "First:\nHello there.\n\n\nSecond:\nBye.  \n\nLast line")
    expected = [["First:", "Hello there."], ["Second:", "Bye."], ["Last line"]]
    assert list(iter_documents([f], "blank_line", "text")) == expected
    assert list(iter_documents([f], "auto", "text")) == expected


def test_wikitext_headings_start_documents(tmp_path: Path) -> None:
    text = (
        " \n = Lobster = \n \n Lobsters are big . They live long .\n"
        " = = Biology = = \n Claws ! \n = Crab = \n Crabs walk .\n"
    )
    f = _write(tmp_path / "w.txt", text)
    expected = [
        ["= Lobster =", "Lobsters are big .", "They live long .", "= = Biology = =", "Claws !"],
        ["= Crab =", "Crabs walk ."],
    ]
    assert list(iter_documents([f], "wikitext", "text")) == expected
    assert list(iter_documents([f], "auto", "text")) == expected  # headings switch auto to wikitext


def test_line_and_file_modes(tmp_path: Path) -> None:
    f = _write(tmp_path / "l.txt", "One. Two.\n\nThree\n")
    g = _write(tmp_path / "m.txt", "Four\n\nFive. Six\n")
    assert list(iter_documents([f, g], "line", "text")) == [["One.", "Two."], ["Three"], ["Four"], ["Five.", "Six"]]
    assert list(iter_documents([f, g], "file", "text")) == [["One. Two.", "Three"], ["Four", "Five. Six"]]
    with pytest.raises(LmptError, match="data.documents=pages is unknown"):
        list(iter_documents([f], "pages", "text"))


@pytest.mark.parametrize("end", ["\n", "", "\n\n"])
@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_stories_end_where_a_line_follows_a_line(tmp_path: Path, newline: str, end: str) -> None:
    lines = [
        "Once there was a cat. It sat.",  # a story of three paragraphs
        "",
        "The cat ran!",
        " ",  # only whitespace: still a paragraph break
        "",
        "The end.",
        "A story of one line. Two sentences.",  # follows a line directly: a new story, which ends here
        "Then a third story?",
        "",
        "Its second paragraph",
    ]
    f = _write(tmp_path / "s.txt", newline.join(lines) + end.replace("\n", newline))
    expected = [
        ["Once there was a cat.", "It sat.", "The cat ran!", "The end."],
        ["A story of one line.", "Two sentences."],
        ["Then a third story?", "Its second paragraph"],
    ]
    assert list(iter_documents([f], "stories", "text")) == expected


@pytest.mark.parametrize(
    "text,expected",
    [
        ("\n\nOnly. One\n", [["Only.", "One"]]),  # blank lines before the first story
        ("A\nB\nC", [["A"], ["B"], ["C"]]),  # every story one line
        ("\n \n", []),
    ],
)
def test_stories_edges(tmp_path: Path, text: str, expected: list[list[str]]) -> None:
    assert list(iter_documents([_write(tmp_path / "s.txt", text)], "stories", "text")) == expected


def test_jsonl_records(tmp_path: Path) -> None:
    records = [{"text": "A first. A second!\nNew para", "id": 1}, {"text": ""}, {"body": "x", "text": "Only"}]
    f = _write(tmp_path / "r.jsonl", "\n".join(json.dumps(r) for r in records) + "\n\n")
    expected = [["A first.", "A second!", "New para"], ["Only"]]
    assert list(iter_documents([f], "auto", "text")) == expected
    assert list(iter_documents([f], "blank_line", "text")) == expected  # jsonl is always per record
    with pytest.raises(LmptError, match=r"r.jsonl:1 has no string field 'body'.*data.text_field"):
        list(iter_documents([f], "auto", "body"))
    bad = _write(tmp_path / "bad.jsonl", '{"text": "ok"}\n{"text": oops}\n')
    with pytest.raises(LmptError, match=r"bad.jsonl:2 is not valid JSON"):
        list(iter_documents([bad], "auto", "text"))


def test_invalid_utf8_names_file_and_byte(tmp_path: Path) -> None:
    f = _write(tmp_path / "latin1.txt", b"good line\ncaf\xe9 au lait\n")
    with pytest.raises(LmptError, match=r"latin1.txt is not valid UTF-8 at byte 13 \(line 2\): convert it to UTF-8"):
        list(iter_documents([f], "blank_line", "text"))


def test_bundled_corpora_split_as_documented() -> None:
    wiki = list(iter_documents([bundled_dir() / "wikitext-2-valid.txt"], "auto", "text"))
    assert len(wiki) == 60 and wiki[0][0] == "= Homarus gammarus ="
    shakespeare = iter_documents([bundled_dir() / "tinyshakespeare.txt"], "auto", "text")
    assert next(shakespeare) == ["First Citizen:", "Before we proceed any further, hear me speak."]
    stories = list(iter_documents([bundled_dir() / "tinystories-prefix.txt"], "stories", "text"))
    assert len(stories) == 5478
    assert stories[0][0] == "one day, a little girl named lily found a needle in her room."
    assert stories[1][0] == "once upon a time, there was a little car named beep."
