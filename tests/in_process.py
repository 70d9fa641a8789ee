"""An lmpt command called in the test's own process, as its console script would run it in a process of its own:
the entry function of pyproject.toml's [project.scripts] with its argv, working directory, environment, standard
streams and exit status, and afterwards the process-wide state the command changed put back as a process's end would
leave it (tests/runner.py's `run_lmpt` is the way in).

What a process would give the command, and how it gets it here:
- argv, the working directory and the environment: `sys.argv`, `os.chdir` and `os.environ` for the call.
- standard streams: file descriptors 0, 1 and 2 point at a file of the input (empty by default) and two temporary
  files for the call, and `sys.stdin`, `sys.stdout` and `sys.stderr` go through them, so whatever writes there is
  captured, as `capture_output=True` captures it: print, lmpt's rich console (it writes to `sys.stdout` or
  `sys.stderr` as it prints), C++ warnings, the child processes a command starts. None of them is a terminal, so a
  console is 80 columns wide or COLUMNS, as in a process whose streams are pipes.
- its exit status: SystemExit's code (None: 0; a string: printed on stderr, 1), an uncaught exception's traceback
  on stderr and 1; past its timeout, SIGALRM stops it and the call raises TimeoutExpired, as subprocess.run does.

What a process's end would drop, put back after the call: Hydra's global state (its GlobalHydra and HydraConfig),
the logging handlers and levels, warning filters, signal handlers and mask, CPU affinity, torch's thread count,
default dtype, deterministic mode, float32 matmul precision, grad mode and RNG states (Python's, numpy's, torch's),
`sys.path`, lmpt's console (its stderr routing; its run log's hook), and lmpt's own once-a-process state: run
directories and cores it holds (released), its run log, the run directories a launch claimed (`unique_dir`) and its
once-a-process warnings (said again, as a new process would). Threads the command left running are joined, as an
interpreter joins them before it exits.

What stays shared, so what a test of it runs as a real process (runner.run_process): the hash seed (a run and its
resumption in one process hash strings in the same order), signals sent to the process, `kill -9`, torchrun's ranks
(WORLD_SIZE > 1 leaves with os._exit), what an interpreter reads as it starts (PYTHONPATH, PYTHONHASHSEED, a thread
count torch has already taken, CUDA_VISIBLE_DEVICES once CUDA is up, rich's FORCE_COLOR), and imports (a bare install
starts every command in CI)."""

from __future__ import annotations

import contextlib
import logging
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
from collections.abc import Callable, Iterator, Mapping
from importlib.metadata import EntryPoint, entry_points

import numpy as np
import torch

STARTUP_ONLY = ("PYTHONPATH", "PYTHONHASHSEED", "PYTHONSTARTUP", "LD_PRELOAD")
"""Environment read as an interpreter (or a library it loads) starts: a command that needs its own value of one of
these runs as a process (runner.run_process)."""


def entry(command: str) -> Callable[[], object]:
    """The console script `command`'s function (`lmpt` -> lmpt.cli:main), as pyproject.toml's [project.scripts]
    names it."""
    return _entry_point(command).load()


def _entry_point(command: str) -> EntryPoint:
    found = [e for e in entry_points(group="console_scripts") if e.name == command and e.value.startswith("lmpt")]
    if not found:
        raise ValueError(f"{command} is not one of lmpt's console scripts")
    return found[0]


def entry_module(command: str) -> str:
    """The module whose `python -m` runs console script `command`."""
    return _entry_point(command).value.partition(":")[0]


def _refuse_startup_env(env: Mapping[str, str]) -> None:
    """A command whose environment differs from this process's in what only a starting process reads cannot run
    here; WORLD_SIZE > 1 ends a process with os._exit (lmpt.app.exit_process)."""
    changed = [k for k in env.keys() | os.environ.keys() if env.get(k) != os.environ.get(k)]
    startup = [k for k in changed if k.startswith(STARTUP_ONLY)]
    startup = [k for k in startup if not (k == "PYTHONPATH" and _path_entries(env.get(k)) <= set(sys.path))]
    if startup or int(env.get("WORLD_SIZE", "1")) > 1:
        raise ValueError(f"{startup or 'WORLD_SIZE'} takes effect as a process starts: use runner.run_process")


def _path_entries(value: str | None) -> set[str]:
    return {os.path.abspath(p) for p in (value or "").split(os.pathsep) if p} - {""}


@contextlib.contextmanager
def _environment(env: Mapping[str, str]) -> Iterator[None]:
    before = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(before)


@contextlib.contextmanager
def _directory(cwd: str | os.PathLike) -> Iterator[None]:
    before = os.getcwd()
    os.chdir(cwd)
    try:
        yield
    finally:
        os.chdir(before)


@contextlib.contextmanager
def _streams(stdin: str | None) -> Iterator[dict[str, str]]:
    """Descriptors 0, 1 and 2 and sys's streams on an input file and two capture files for the block; what was
    written to them is in the dict it yields once the block ends ("stdout", "stderr")."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    captured: dict[str, str] = {}
    with tempfile.TemporaryFile() as source, tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        source.write((stdin or "").encode())
        source.seek(0)
        saved = [os.dup(fd) for fd in (0, 1, 2)]
        python = sys.stdin, sys.stdout, sys.stderr
        try:
            for fd, target in zip((0, 1, 2), (source, out, err), strict=True):
                os.dup2(target.fileno(), fd)
            sys.stdin = open(0, encoding="utf-8", closefd=False)
            sys.stdout = open(1, "w", encoding="utf-8", closefd=False)
            sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False, buffering=1)
            yield captured
        finally:
            for stream in (sys.stdin, sys.stdout, sys.stderr):
                with contextlib.suppress(ValueError, OSError):
                    stream.close()  # flushes; the descriptors stay (closefd=False)
            sys.stdin, sys.stdout, sys.stderr = python
            for fd, copy in zip((0, 1, 2), saved, strict=True):
                os.dup2(copy, fd)
                os.close(copy)
            for name, file in (("stdout", out), ("stderr", err)):
                file.seek(0)
                captured[name] = file.read().decode("utf-8", errors="replace")


@contextlib.contextmanager
def _torch_state() -> Iterator[None]:
    threads, dtype = torch.get_num_threads(), torch.get_default_dtype()
    deterministic = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    matmul, grad = torch.get_float32_matmul_precision(), torch.is_grad_enabled()
    rng = torch.get_rng_state(), random.getstate(), np.random.get_state()
    try:
        yield
    finally:
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
        torch.set_default_dtype(dtype)
        torch.use_deterministic_algorithms(deterministic, warn_only=warn_only)
        torch.set_float32_matmul_precision(matmul)
        torch.set_grad_enabled(grad)
        torch.set_rng_state(rng[0])
        random.setstate(rng[1])
        np.random.set_state(rng[2])


@contextlib.contextmanager
def _process_state() -> Iterator[None]:
    """Signal handlers and mask, CPU affinity, logging, warning filters and sys.path, as they were."""
    import warnings

    handlers = {s: signal.getsignal(s) for s in signal.valid_signals() if s not in (signal.SIGKILL, signal.SIGSTOP)}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    affinity = os.sched_getaffinity(0)
    root = logging.getLogger()
    loggers = {name: (lg.handlers[:], lg.level, lg.propagate) for name, lg in _loggers()}
    path = sys.path[:]
    try:
        with warnings.catch_warnings():
            yield
    finally:
        for sig, handler in handlers.items():
            if handler is not None and signal.getsignal(sig) is not handler:
                signal.signal(sig, handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        os.sched_setaffinity(0, affinity)
        for name, lg in _loggers():
            handlers_before, level, propagate = loggers.get(name, ([], logging.NOTSET, True))
            for handler in lg.handlers[:]:
                if handler not in handlers_before:
                    lg.removeHandler(handler)
                    handler.close()
            lg.setLevel(level)
            lg.propagate = propagate
        root.disabled = False
        sys.path[:] = path


def _loggers() -> Iterator[tuple[str, logging.Logger]]:
    yield "", logging.getLogger()
    for name, lg in list(logging.Logger.manager.loggerDict.items()):
        if isinstance(lg, logging.Logger):
            yield name, lg


@contextlib.contextmanager
def _lmpt_state() -> Iterator[None]:
    """lmpt's console as it was, and lmpt's once-a-process state dropped after the command, as its process's end
    would drop it (and before, for a test that called lmpt's functions directly)."""
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig

    from lmpt.console import console

    def fresh() -> None:
        GlobalHydra.instance().clear()
        HydraConfig.instance().cfg = None
        _drop_lmpt_process_state()

    stderr = console.stderr
    fresh()
    console.stderr = False
    try:
        yield
    finally:
        fresh()  # closes the run log, which takes its render hook off the console
        console.stderr = stderr


def _drop_lmpt_process_state() -> None:
    from lmpt.config import resolvers
    from lmpt.downstream import records, run_tasks
    from lmpt.report import runs, sweep
    from lmpt.rundir import checkpoint, directory, log
    from lmpt.train import placement

    log.close_run_log()
    directory.release_run_dirs()
    placement.release_claims()
    resolvers._claimed.clear()  # run directories claimed by name: another launch claims afresh
    checkpoint._WARNED.clear()  # warnings said once a process
    runs._UNREADABLE.clear()
    records._NAMED.clear()
    sweep.unfinished_jobs.clear()  # the last sweep's, for its exit code
    run_tasks._note_old_keys.cache_clear()


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # as the interpreter prints sys.exit("...")
    return 1


class _Timeout(BaseException):
    """Raised in the command when its time is up: a BaseException, so the command's own handlers let it pass."""


@contextlib.contextmanager
def _time_limit(seconds: float | None) -> Iterator[None]:
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum, frame) -> None:
        raise _Timeout

    before = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)


def _join_new_threads(before: set[threading.Thread], timeout: float = 30) -> None:
    """Wait for the non-daemon threads the command started, as an interpreter does before it exits."""
    for thread in threading.enumerate():
        if thread not in before and not thread.daemon and thread is not threading.current_thread():
            thread.join(timeout)


def call(
    command: str,
    args: list[str],
    cwd: str | os.PathLike,
    env: Mapping[str, str],
    input: str | None = None,
    timeout: float | None = None,
) -> subprocess.CompletedProcess:
    """Run console script `command` with `args` here, as `subprocess.run([command, *args], cwd=cwd, env=env,
    input=input, capture_output=True, text=True, timeout=timeout)` would run it; TimeoutExpired as run raises it."""
    main = entry(command)
    _refuse_startup_env(env)
    threads = set(threading.enumerate())
    code: int | None = 0
    with _streams(input) as captured:
        with _environment(env), _directory(cwd), _process_state(), _torch_state(), _lmpt_state():
            argv, sys.argv = sys.argv, [command, *args]
            try:
                with _time_limit(timeout):
                    main()
            except SystemExit as exc:
                code = _exit_code(exc.code)
            except _Timeout:
                code = None
            except KeyboardInterrupt:
                raise
            except BaseException:
                traceback.print_exc()
                code = 1
            finally:
                sys.argv = argv
                _join_new_threads(threads)
    from lmpt.console import console

    assert not getattr(console.file, "closed", False), f"{command} left lmpt's console on the stream it was given"
    if code is None:
        raise subprocess.TimeoutExpired([command, *args], timeout or 0, captured["stdout"], captured["stderr"])
    return subprocess.CompletedProcess([command, *args], code, captured["stdout"], captured["stderr"])
