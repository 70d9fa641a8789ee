"""lmpt.locks, the one home of lmpt's file locks, between real processes: a lock is held while its holder keeps the
file open, probed without being taken, waited for, and released by the kernel when its holder is killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

from lmpt.locks import held, holder, try_lock

HOLD = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path
    from lmpt.locks import try_lock
    handle = try_lock(Path(sys.argv[1]))
    handle.write(f"{os.getpid()}\\n"); handle.flush()
    print("held", flush=True)
    time.sleep(60)
    """
)


def _holding(path: Path) -> subprocess.Popen:
    child = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "held"
    return child


def test_a_lock_another_process_holds_is_refused_probed_and_freed_when_it_is_killed(tmp_path: Path) -> None:
    path = tmp_path / ".lock"
    assert holder(path) is None  # no file: nobody holds it
    child = _holding(path)
    try:
        assert try_lock(path) is None
        assert holder(path) == str(child.pid)  # the probe reads what the holder wrote, taking nothing
        assert try_lock(path) is None
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    assert holder(path) is None  # the kernel released it with the process
    mine = try_lock(path)
    assert mine is not None
    mine.close()


def test_held_waits_for_the_holder_to_end(tmp_path: Path) -> None:
    path = tmp_path / ".lock"
    first = try_lock(path)
    assert first is not None
    entered: list[float] = []

    def second() -> None:
        with held(path):
            entered.append(time.monotonic())

    thread = threading.Thread(target=second)  # another open file description: flock holds them apart
    thread.start()
    time.sleep(0.5)
    assert entered == []  # still waiting
    released = time.monotonic()
    first.close()
    thread.join(timeout=10)
    assert entered and entered[0] >= released
