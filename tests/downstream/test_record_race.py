"""Two processes writing the same task record at once (issue 32): each stages in a file of its own, so a reader
only ever sees one writer's whole record, never a torn mix of two."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

from lmpt.downstream.records import write_record

WRITES = 300


def _writer(path: str, who: int) -> None:
    padding = "x" * (2000 + 1000 * who)  # records of different lengths: a torn file shows
    for i in range(WRITES):
        write_record(Path(path), {"writer": who, "i": i, "padding": padding})


def test_racing_writers_never_tear_a_record(tmp_path: Path) -> None:
    path = tmp_path / "downstream" / "task.json"
    write_record(path, {"writer": -1})
    context = multiprocessing.get_context("fork")
    writers = [context.Process(target=_writer, args=(str(path), who)) for who in (0, 1)]
    for writer in writers:
        writer.start()
    reads, torn = 0, []
    while any(writer.is_alive() for writer in writers) or reads == 0:
        text = path.read_text(encoding="utf-8")
        reads += 1
        try:
            json.loads(text)
        except ValueError:
            torn.append(text[:80])
    for writer in writers:
        writer.join()
    assert [writer.exitcode for writer in writers] == [0, 0]
    assert not torn, f"{len(torn)} torn reads of {reads}"
    assert json.loads(path.read_text())["i"] == WRITES - 1
    assert [p.name for p in path.parent.iterdir()] == ["task.json"]  # no staging file left behind
