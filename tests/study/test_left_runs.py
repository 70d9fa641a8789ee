"""STUDY/.running is trusted only for runs under the study's own folder: a file naming a run elsewhere (a copied or
edited study folder) never has that run signalled."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from lmpt.study import pool


def test_a_run_outside_the_study_named_in_running_is_never_signalled(tmp_path: Path) -> None:
    study, elsewhere = tmp_path / "study", tmp_path / "someone-elses-run"
    study.mkdir()
    elsewhere.mkdir()
    holder = subprocess.Popen(  # a live process that holds the other run's lock, as a training run does
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from lmpt.rundir.directory import lock_run_dir; "
            "lock_run_dir(Path(sys.argv[1])); time.sleep(60)",
            str(elsewhere),
        ],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    try:
        deadline = time.monotonic() + 30
        while pool.lock_holder(elsewhere) != holder.pid and time.monotonic() < deadline:
            time.sleep(0.1)
        assert pool.lock_holder(elsewhere) == holder.pid
        (study / pool.RUNNING).write_text(json.dumps([{"pid": holder.pid, "run": str(elsewhere)}]))
        pool.stop_left_run(study)
        assert holder.poll() is None  # still running: not signalled
        assert not (study / pool.RUNNING).exists()
    finally:
        holder.kill()
        holder.wait()
