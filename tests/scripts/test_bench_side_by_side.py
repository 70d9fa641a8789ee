"""scripts/bench_side_by_side.py: the ratios it prints and the environment its runs get (each run chooses its own
threads). The script itself trains real runs for minutes, so the tests check its pieces, not timings."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
import bench_side_by_side as bench  # noqa: E402


def test_each_run_beside_another_is_measured_against_the_median_run_alone() -> None:
    alones = [bench.Timing(10.0, 8.0, "2 threads"), bench.Timing(12.0, 9.0, "2 threads")]
    pairs = [[bench.Timing(20.0, 16.0, "1 thread"), bench.Timing(24.0, 18.0, "1 thread")]]
    figures = bench.summarize(alones, pairs)
    assert (figures["alone_wall_s"], figures["side_by_side_wall_s"]) == (11.0, 22.0)
    assert (figures["wall_ratio_median"], figures["wall_ratio_worst"]) == (2.0, round(24 / 11, 3))
    assert figures["met"] and figures["goal"] == 2.5
    slow = bench.summarize(alones, [[bench.Timing(20.0, 16.0, "1"), bench.Timing(30.0, 25.0, "1")]])
    assert not slow["met"]  # the worst of the two counts, not the median


def test_the_runs_choose_their_own_threads_and_share_one_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("LMPT_THREADS", "2")
    env = bench.run_env(tmp_path)
    assert "OMP_NUM_THREADS" not in env and "LMPT_THREADS" not in env
    assert env["LMPT_CACHE_DIR"] == str(tmp_path) and env["PYTHONPATH"].split(os.pathsep)[0] == str(REPO)
    assert len(bench.two_cores()) == min(2, len(os.sched_getaffinity(0)))
