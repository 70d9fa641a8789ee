"""The tests' warm Python (forkserver.py): a command forked from it does what the same command does in a fresh
interpreter (the same losses, weights, exit codes and error lines), its process answers signals and timeouts as a
child's does, and a command the server cannot stand in for (a start-up setting of its own) starts fresh."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import forkserver
import pytest
from runner import TINY_RUN, lmpt_command, lmpt_env, train_losses

RUN = [*TINY_RUN, "trainer.max_steps=6", "trainer.log_every=1", "trainer.eval_every=3", "trainer.ckpt_every=3"]


@pytest.fixture(scope="module", autouse=True)
def servers() -> Iterator[None]:
    """This module's own servers, of the environment its commands have (an earlier test in the worker may have left
    one in os.environ that the session's servers do not serve)."""
    with forkserver.servers(lmpt_env()):
        yield


def forked_run(command: list[str], **options) -> subprocess.CompletedProcess:
    with forkserver.ForkedPopen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **options) as p:
        out, err = p.communicate(timeout=300)
    return subprocess.CompletedProcess(command, p.returncode, out, err)


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def blocked(pid: int) -> set[int]:
    line = next(x for x in Path(f"/proc/{pid}/status").read_text().splitlines() if x.startswith("SigBlk:"))
    mask = int(line.split()[1], 16)
    return {s for s in signal.valid_signals() if mask >> (s - 1) & 1}


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_forked_run_trains_refuses_and_helps_as_a_fresh_interpreter_does(tmp_path: Path) -> None:
    runs = {}
    for how, run in (("fresh", forkserver.fresh_run), ("forked", forked_run)):
        done = run(lmpt_command(*RUN, f"hydra.run.dir={how}"), cwd=tmp_path, env=lmpt_env())
        assert done.returncode == 0, done.stderr[-2000:]
        refused = run(lmpt_command(*RUN, "trainer.max_stpes=3"), cwd=tmp_path, env=lmpt_env())
        helped = run(lmpt_command("--help"), cwd=tmp_path, env=lmpt_env())
        runs[how] = (train_losses(tmp_path / how), sha(tmp_path / how / "model.safetensors"), refused, helped)
    (losses, weights, refused, helped), fresh = runs["forked"], runs["fresh"]
    assert len(losses) == 6 and (losses, weights) == fresh[:2]  # bit for bit
    assert (refused.returncode, refused.stderr, refused.stdout) == (2, fresh[2].stderr, fresh[2].stdout)
    assert "unknown config key 'trainer.max_stpes'" in refused.stderr
    assert (helped.returncode, helped.stdout) == (0, fresh[3].stdout) and "objective" in helped.stdout


def test_a_forked_process_answers_signals_timeouts_and_sessions_as_a_child_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    endless = lmpt_command(*TINY_RUN, "trainer.max_steps=1000000", "trainer.log_every=1")
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR2})  # a child inherits what its parent blocks
    try:
        process = forkserver.ForkedPopen(
            endless, cwd=tmp_path, env=lmpt_env(), stdout=subprocess.DEVNULL, start_new_session=True
        )
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGUSR2})
    with pytest.raises(subprocess.TimeoutExpired):
        process.wait(timeout=0.2)
    assert process.poll() is None and os.getsid(process.pid) == process.pid  # a session of its own
    assert parent_of(process.pid) != os.getpid()  # forked by the server
    assert blocked(process.pid) == {signal.SIGUSR2}
    process.send_signal(signal.SIGKILL)
    assert process.wait(timeout=60) == -signal.SIGKILL and process.poll() == -signal.SIGKILL

    monkeypatch.setattr(subprocess, "Popen", forkserver.ForkedPopen)  # as conftest.py sets it for the session
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        subprocess.run(endless, cwd=tmp_path, env=lmpt_env(), capture_output=True, timeout=3)
    assert time.monotonic() - started < 60  # killed and reaped, not left training


def test_a_command_with_its_own_start_up_settings_starts_fresh(tmp_path: Path) -> None:
    endless = lmpt_command(*TINY_RUN, "trainer.max_steps=1000000", "trainer.log_every=1")
    parents = {}
    cases = {
        "runtime": lmpt_env(LMPT_THREADS="1"),
        "scikit-learn": lmpt_env(KMP_DUPLICATE_LIB_OK="True", KMP_INIT_AT_FORK="FALSE"),  # set as it imports
        "start-up": lmpt_env(OMP_NUM_THREADS="2"),
    }
    for name, env in cases.items():
        process = forkserver.ForkedPopen(endless, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL)
        parents[name] = parent_of(process.pid)
        process.kill()
        process.wait(timeout=60)
    assert parents["runtime"] != os.getpid()  # forked: lmpt reads LMPT_THREADS as it runs
    assert parents["scikit-learn"] != os.getpid()  # forked: no Intel OpenMP is loaded to read KMP_*
    assert parents["start-up"] == os.getpid()  # OpenMP reads OMP_NUM_THREADS as torch loads: a fresh interpreter
    with pytest.raises(FileNotFoundError):  # as Popen raises it
        forkserver.ForkedPopen(lmpt_command("--help"), cwd=tmp_path / "missing", env=lmpt_env())
    bash = forkserver.ForkedPopen(["bash", "-c", "echo $PPID"], stdout=subprocess.PIPE, text=True)
    assert int(bash.communicate(timeout=60)[0]) == os.getpid()
