"""A warm `python -m lmpt` for the tests (`run`, in place of `subprocess.run`).

Each test worker starts one server process that imports torch and lmpt once, then forks a child for every command:
the child is the real command in a real process (its own pid, signal handlers, file descriptors and exit code) that
runs lmpt's own `__main__` with the command's arguments, working directory and environment. Only the second or two of
importing torch and lmpt is paid once per worker instead of once per command. A command whose environment differs
from the server's in a variable read while importing (threads, the hash seed, the import path) runs as a plain
subprocess, as does anything that is not `python -m lmpt ...`. Tests of resuming across processes (bit-for-bit
golden runs, kills) start their runs as plain subprocesses: each has a hash seed of its own, as a user's would.
"""

from __future__ import annotations

import atexit
import json
import os
import runpy
import signal
import socket
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

REAL_RUN = subprocess.run
"""subprocess.run itself, whatever the tests' session makes of the name (tests/conftest.py: `forked_commands`)."""
IMPORT_TIME = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "PYTHONPATH", "PYTHONHASHSEED", "CUDA_VISIBLE_DEVICES")
"""Variables read while torch and lmpt import: a command that sets them otherwise than the server gets a subprocess."""
WARM = ("torch", "lmpt.cli", "lmpt.app", "lmpt.objectives.registry", "lmpt.train.run", "lmpt.downstream.run_tasks")


def _child(request: dict[str, Any]) -> None:
    """In the forked child: become the command, run it, exit with its code (never returns)."""
    code = 1
    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        for fd, path, flags in (
            (0, os.devnull, os.O_RDONLY),
            (1, request["stdout"], os.O_WRONLY),
            (2, request["stderr"], os.O_WRONLY),
        ):
            opened = os.open(path, flags)
            os.dup2(opened, fd)
            os.close(opened)
        sys.argv = ["-m" if request["module"] else request["path"], *request["args"]]
        sys.path[0] = request["cwd"] if request["module"] else str(Path(request["path"]).resolve().parent)
        if request["module"]:
            sys.modules.pop(request["module"], None)  # as in a fresh interpreter: only __main__ holds its code
            runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(request["path"], run_name="__main__")
        code = 0
    except SystemExit as stop:
        if stop.code is None or isinstance(stop.code, int):
            code = stop.code or 0
        else:
            print(stop.code, file=sys.stderr)
    except BaseException:  # as the interpreter would: the traceback on stderr, exit 1
        traceback.print_exc()
    finally:
        try:
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def serve(fd: int) -> None:
    """The server: import what every command imports, then fork a child per request, report its pid and its exit."""
    for name in WARM:
        __import__(name)
    connection = socket.socket(fileno=fd)
    reader = connection.makefile("r")
    for line in reader:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            connection.close()
            _child(request)
        connection.sendall((json.dumps({"pid": pid}) + "\n").encode())
        _, status = os.waitpid(pid, 0)
        connection.sendall((json.dumps({"returncode": os.waitstatus_to_exitcode(status)}) + "\n").encode())


class Zygote:
    """One server per test process, started on first use with `env` (lmpt's test environment)."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = dict(env)
        self.process: subprocess.Popen | None = None

    def _start(self) -> None:
        ours, theirs = socket.socketpair()
        self.process = subprocess.Popen(  # its own output nowhere a terminal is: rich sees none, as under capture
            [sys.executable, __file__, str(theirs.fileno())],
            env=self.env,
            pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
        )
        theirs.close()
        self.socket, self.reader = ours, ours.makefile("r")
        atexit.register(self.close)

    def close(self) -> None:
        """Stop the server (it ends when its connection closes); the next command starts another."""
        if self.process is not None:
            self.reader.close()
            self.socket.close()
            self.process.wait(timeout=60)
            self.process = None

    def takes(self, command: list[str], env: dict[str, str]) -> bool:
        """Whether `command` can be forked from the server: `python -m MODULE ...` or `python SCRIPT.py ...`, with
        the server's import-time environment."""
        forked = (
            len(command) >= 2 and command[0] == sys.executable and (command[1] == "-m" or command[1].endswith(".py"))
        )
        return forked and all(env.get(k) == self.env.get(k) for k in IMPORT_TIME)

    def run(
        self, command: list[str], cwd: str | Path, env: dict[str, str], timeout: float | None = None
    ) -> subprocess.CompletedProcess:
        """`command` run as `subprocess.run(..., capture_output=True, text=True)` would, forked when it can be."""
        if not self.takes(command, env):
            return REAL_RUN(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
        if self.process is None or self.process.poll() is not None:
            self._start()
        module = command[2] if command[1] == "-m" else None
        args = command[3:] if module else command[2:]
        with tempfile.TemporaryDirectory() as tmp:
            out, err = Path(tmp) / "stdout", Path(tmp) / "stderr"
            out.touch()
            err.touch()
            request = {
                "module": module,
                "path": None if module else command[1],
                "args": args,
                "cwd": str(Path(cwd).resolve()),
                "env": env,
                "stdout": str(out),
                "stderr": str(err),
            }
            self.socket.sendall((json.dumps(request) + "\n").encode())
            pid = json.loads(self.reader.readline())["pid"]
            self.socket.settimeout(timeout)
            try:
                returncode = json.loads(self.reader.readline())["returncode"]
            except TimeoutError:
                os.kill(pid, signal.SIGKILL)
                self.close()  # a timed-out connection reads no more: the next command starts a fresh server
                raise subprocess.TimeoutExpired(command, timeout or 0, out.read_text(), err.read_text()) from None
            self.socket.settimeout(None)
            return subprocess.CompletedProcess(
                command, returncode, out.read_text(errors="replace"), err.read_text(errors="replace")
            )

    def subprocess_run(self, *popenargs: Any, **kwargs: Any) -> subprocess.CompletedProcess:
        """In place of `subprocess.run`: a command that captures its output as text (and sets nothing else but its
        directory, environment, timeout and check) is run by `run`; any other call is subprocess.run's."""
        command = popenargs[0] if popenargs else kwargs.get("args")
        plain = set(kwargs) <= {"args", "cwd", "env", "capture_output", "text", "timeout", "check"}
        if len(popenargs) > 1 or not plain or not (kwargs.get("capture_output") and kwargs.get("text")):
            return REAL_RUN(*popenargs, **kwargs)
        if not isinstance(command, list | tuple):
            return REAL_RUN(*popenargs, **kwargs)
        command = [os.fspath(c) for c in command]
        env = dict(os.environ) if kwargs.get("env") is None else dict(kwargs["env"])
        done = self.run(command, kwargs.get("cwd") or os.getcwd(), env, kwargs.get("timeout"))
        if kwargs.get("check") and done.returncode:
            raise subprocess.CalledProcessError(done.returncode, command, done.stdout, done.stderr)
        return done


if __name__ == "__main__":
    serve(int(sys.argv[1]))
