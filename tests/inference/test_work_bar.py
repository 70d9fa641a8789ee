"""Long inference work off a terminal (a pipe, nohup) says how far it is every PLAIN_EVERY_S, never nothing for a
minute (issue 63, point 18); a terminal gets rich's bar instead, and json output neither."""

from __future__ import annotations

import lmpt.inference.progress as progress
from lmpt.inference.progress import PLAIN_EVERY_S, WorkBar


def test_piped_work_prints_a_plain_line_every_interval(monkeypatch, capsys) -> None:
    clock = iter([0.0, 1.0, PLAIN_EVERY_S + 1, PLAIN_EVERY_S + 2, 2 * PLAIN_EVERY_S + 3])
    monkeypatch.setattr(progress.time, "perf_counter", lambda: next(clock))
    with WorkBar("scoring windows", hidden=False, unit="windows") as bar:  # capsys: not a terminal
        bar.start(100)
        for _ in range(4):
            bar.advance(20)
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "scoring windows: 40 of 100 windows (40%) in 0m21s, about 0m31s left",
        "scoring windows: 80 of 100 windows (80%) in 0m43s, about 0m10s left",
    ]


def test_json_output_and_short_work_print_nothing(capsys) -> None:
    with WorkBar("scoring windows", hidden=True) as bar:
        bar.start(10)
        bar.advance(10)
    with WorkBar("scoring windows", hidden=False) as bar:
        bar.start(10)
        bar.advance(10)
    assert capsys.readouterr().out == ""
