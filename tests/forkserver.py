"""A warm Python for the tests' lmpt commands. Each command still runs in a process of its own, with its own argv,
working directory, environment, standard streams, exit status and signals (it blocks and ignores what a child of
the test would inherit). But that process is forked from a server that has already imported torch (and
torch._dynamo, which every run imports), Hydra and lmpt, instead of spending about 3 s of one core importing them
again. Most of the suite's commands last 1 to 4 seconds: on 2 cores the suite takes 634 s this way, 869 s with
every command fresh.

The test side is `ForkedPopen`, a `subprocess.Popen` that conftest.py installs as `subprocess.Popen` for the session
(so `subprocess.run` and every test's own helper use it): a command of the form `python -m lmpt...` or `python
SCRIPT.py` under this checkout, whose environment differs from the server's only in what lmpt reads as it runs
(`RUNTIME_ENV`), is forked from the server; any other command (bash, torchrun, sbatch, a changed OMP_NUM_THREADS or
PYTHONPATH, which a process reads as it starts) spawns a fresh interpreter as before. The child's pid is real, so
tests signal it (SIGTERM, SIGKILL, a new session's group) as they would any child; its status comes back from the
server, which reaps it, and reads as Popen's `returncode` does (negative for a signal).

What a fork does not repeat: the imports themselves (`scripts/check_bare_install.py` in CI imports every module and
starts every command in a bare install, and the README's run starts a real interpreter), and a fresh hash seed per
command: there are two servers per test worker, and commands alternate between them, so a run and its resumption
never share a string-hash order. `LMPT_TEST_FORK=0` turns forking off: every command a fresh interpreter.

The server: `python tests/forkserver.py SOCKET` imports, listens on the Unix socket, and for each connection reads
one request (JSON, with the child's stdin, stdout and stderr passed as file descriptors), forks, answers the pid
once the child is set up (or the OSError that stopped it, which Popen raises), and when the child ends, its wait
status. The child leaves the server's loop and runs the command at the top level of this script, so it ends as an
interpreter does: atexit handlers, thread joins, `SystemExit`'s code.
"""

from __future__ import annotations

import contextlib
import inspect
import itertools
import json
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PRELOAD = [
    "torch",
    "torch._inductor.config",  # torch._dynamo: torch.use_deterministic_algorithms imports it, as does an optimizer
    "lmpt.cli",
    "lmpt.train.run",
    "lmpt.train.session",
    "lmpt.downstream.run_tasks",
    "lmpt.preview.cli",
    "lmpt.prepare.cli",
    "lmpt.report.compare",
    "lmpt.inference.generate",
    "lmpt.inference.fill",
    "lmpt.downstream.eval_cli",
    "lmpt.hf.export",
    "lmpt.downstream.finetune_cli",
    "lmpt.study.cli",
    "lmpt.reproduce.cli",
]
"""What the server imports once: every command of lmpt and what a run imports on its way."""

RUNTIME_ENV = ("LMPT_", "HYDRA_", "SLURM_", "FAKE_", "TORCHELASTIC_", "HF_", "TRANSFORMERS_", "DATATROVE_", "KMP_")
RUNTIME_NAMES = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "PATH"}
RUNTIME_NAMES |= {"CUBLAS_WORKSPACE_CONFIG", "PYTEST_CURRENT_TEST", "PYTHONUNBUFFERED"}
"""Environment variables lmpt reads while it runs, not as it imports: a command's own values of these still fork.
(HF_*, TRANSFORMERS_*, DATATROVE_*: read as their libraries import, which the server does not: `NOT_PRELOADED`.
KMP_*: read by Intel's OpenMP as it loads, which the server does not load; scikit-learn sets two as it imports, so a
test worker that imported it would otherwise fork nothing after.)"""

NOT_PRELOADED = ("huggingface_hub", "datasets", "transformers", "datatrove")
"""Libraries that read their environment as they import: the server refuses to start if its imports bring one in."""


def forking() -> bool:
    return os.environ.get("LMPT_TEST_FORK", "1") != "0"


def _runtime(name: str) -> bool:
    return name in RUNTIME_NAMES or name.startswith(RUNTIME_ENV)


class _Server:
    """One server process and the socket it listens on."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = dict(env)
        self.dir = tempfile.mkdtemp(prefix="lmpt-fork-")
        self.socket = os.path.join(self.dir, "socket")
        self.process = _REAL_POPEN(
            [sys.executable, __file__, self.socket],
            cwd=REPO,
            env=self.env,
            stdin=subprocess.PIPE,  # the server ends when this closes: the test worker is gone
            stdout=subprocess.PIPE,
            text=True,
        )
        self.ready = False

    def wait_ready(self) -> None:
        if not self.ready:
            line = self.process.stdout.readline() if self.process.stdout else ""
            if line.strip() != "ready":
                raise RuntimeError(f"the fork server did not start (exit {self.process.poll()}): {line!r}")
            self.ready = True

    def serves(self, env: dict[str, str]) -> bool:
        keys = self.env.keys() | env.keys()
        return all(_runtime(k) for k in keys if self.env.get(k) != env.get(k))

    def close(self) -> None:
        if self.process.stdin:
            self.process.stdin.close()
        self.process.wait(timeout=30)
        shutil.rmtree(self.dir, ignore_errors=True)


_REAL_POPEN = subprocess.Popen
_servers: list[_Server] = []
_turns = itertools.count()


@contextlib.contextmanager
def servers(env: dict[str, str], count: int = 2) -> Iterator[None]:
    """Two servers of `env` for `ForkedPopen` while the block runs, beside any already running (they import in the
    background; the first command waits for its server). With none, `ForkedPopen` is `subprocess.Popen`."""
    started = [_Server(env) for _ in range(count)]
    _servers.extend(started)
    try:
        yield
    finally:
        for server in started:
            _servers.remove(server)
            server.close()


@contextlib.contextmanager
def installed(env: dict[str, str]) -> Iterator[None]:
    """`ForkedPopen` as `subprocess.Popen` while the block runs (so `subprocess.run` and every helper use it)."""
    with servers(env):
        subprocess.Popen = ForkedPopen  # type: ignore[misc]
        try:
            yield
        finally:
            subprocess.Popen = _REAL_POPEN  # type: ignore[misc]


def fresh_run(command: list[str], timeout: float = 300, **options) -> subprocess.CompletedProcess:
    """`subprocess.run(command, capture_output=True, text=True)` in a fresh interpreter, whatever the session does."""
    with _REAL_POPEN(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **options) as process:
        try:
            out, err = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            raise
    return subprocess.CompletedProcess(command, process.returncode, out, err)


def _server_for(env: dict[str, str]) -> _Server | None:
    usable = [s for s in _servers if s.serves(env)]
    if not usable:
        return None
    return usable[next(_turns) % len(usable)]


def _target(args: object, executable: object, shell: bool) -> list[str] | None:
    """The command's argv after the interpreter when it is one the server runs: `-m lmpt...` or a script in this
    checkout."""
    if shell or executable is not None or not isinstance(args, (list, tuple)) or len(args) < 2:
        return None
    argv = [os.fspath(a) for a in args]
    if argv[0] != sys.executable:
        return None
    if argv[1] == "-m" and len(argv) > 2 and (argv[2] == "lmpt" or argv[2].startswith("lmpt.")):
        return argv[1:]
    script = Path(argv[1])
    if script.suffix == ".py" and script.is_absolute() and script.is_relative_to(REPO):
        return argv[1:]
    return None


_EXECUTE = inspect.signature(_REAL_POPEN._execute_child)


class ForkedPopen(subprocess.Popen):
    """`subprocess.Popen`, but a command the fork server runs is forked from it (see the module's docstring)."""

    _status: socket.socket | None = None

    def _execute_child(self, *args):  # the signature of the running Python's Popen._execute_child
        call = _EXECUTE.bind(self, *args).arguments
        argv = _target(call["args"], call["executable"], call["shell"])
        env = dict(os.environ if call["env"] is None else call["env"])
        plain = (
            call["preexec_fn"] is None
            and not call["pass_fds"]
            and call.get("process_group", -1) in (None, -1)
            and all(call.get(k) in (None, -1) for k in ("gid", "uid", "umask"))
            and not call.get("gids")
        )
        server = _server_for(env) if argv is not None and plain else None
        if server is None:
            return super()._execute_child(*args)
        server.wait_ready()
        fds = [call["p2cread"], call["c2pwrite"], call["errwrite"]]
        fds = [fd if fd != -1 else i for i, fd in enumerate(fds)]  # not redirected: this process's own stream
        request = {
            "argv": argv,
            "cwd": os.fspath(call["cwd"]) if call["cwd"] is not None else os.getcwd(),
            "env": {os.fsdecode(k): os.fsdecode(v) for k, v in env.items()},
            "new_session": bool(call["start_new_session"]),
            **_signals(),
        }
        status = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            status.connect(server.socket)
            socket.send_fds(status, [json.dumps(request).encode() + b"\n"], fds)
            reply = _read_line(status)
            if reply.startswith("["):  # the child could not be set up: Popen's own error
                errno, strerror, filename = json.loads(reply)
                raise OSError(errno, strerror, filename)
            self.pid = int(reply)
            self._child_created = True
        except BaseException:
            status.close()
            raise
        finally:
            pipes = ("p2cread", "p2cwrite", "c2pread", "c2pwrite", "errread", "errwrite")
            self._close_pipe_fds(*(call[k] for k in pipes))
        self._status = status

    def _try_wait(self, wait_flags):
        if self._status is None:
            return super()._try_wait(wait_flags)
        self._status.setblocking(not wait_flags & os.WNOHANG)
        try:
            line = _read_line(self._status)
        except BlockingIOError:
            return (0, 0)
        self._status.close()
        return (self.pid, int(line))

    def _internal_poll(self, _deadstate=None, *rest):
        if self._status is None:
            return super()._internal_poll(_deadstate, *rest)
        if self.returncode is None and self._waitpid_lock.acquire(False):
            try:
                if self.returncode is None:
                    pid, sts = self._try_wait(os.WNOHANG)
                    if pid == self.pid:
                        self._handle_exitstatus(sts)
            finally:
                self._waitpid_lock.release()
        return self.returncode


def _signals() -> dict[str, list[int]]:
    """What a child of this thread inherits through exec: the blocked signals, and the ignored ones (but those
    Popen's restore_signals puts back)."""
    restored = {signal.SIGPIPE, signal.SIGXFSZ}
    ignored = [s for s in signal.valid_signals() if s not in restored and signal.getsignal(s) is signal.SIG_IGN]
    return {"blocked": sorted(signal.pthread_sigmask(signal.SIG_BLOCK, [])), "ignored": sorted(ignored)}


def _read_line(conn: socket.socket) -> str:
    """One newline-ended line from `conn`, read a byte at a time: the pid and, for a child that ends at once, its
    status may wait there together. Each line comes in one send of a few bytes: a non-blocking read that finds
    nothing finds it before the first byte."""
    data = b""
    while not data.endswith(b"\n"):
        byte = conn.recv(1)
        if not byte:
            raise ConnectionError("the fork server closed the connection")
        data += byte
    return data.decode().strip()


# The server.


def _serve(path: str) -> dict:
    """Accept requests until stdin closes; returns only in a forked child, with the child's request."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "accept")
    selector.register(sys.stdin, selectors.EVENT_READ, "stdin")
    children: dict[int, tuple[int, socket.socket]] = {}  # pidfd -> (pid, its connection)
    print("ready", flush=True)
    while True:
        for key, _ in selector.select():
            if key.data == "stdin":
                if not sys.stdin.readline():
                    sys.exit(0)
            elif key.data == "accept":
                conn, _ = listener.accept()
                request, fds = _receive(conn)
                if request is None:  # the test went away mid-request
                    conn.close()
                    for fd in fds:
                        os.close(fd)
                    continue
                started, ready = os.pipe()  # the child closes it once set up, or writes why it could not be
                pid = os.fork()
                if pid == 0:
                    os.close(started)
                    selector.close()
                    listener.close()
                    for _, other in children.values():
                        other.close()
                    for pidfd in children:
                        os.close(pidfd)
                    conn.close()
                    try:
                        _enter(request, fds)
                    except OSError as exc:  # as Popen raises it: a missing cwd is a FileNotFoundError
                        os.write(ready, json.dumps([exc.errno, exc.strerror, exc.filename]).encode())
                        os._exit(255)
                    os.close(ready)
                    return request
                os.close(ready)
                for fd in fds:
                    os.close(fd)
                failure = _read_all(started)
                conn.sendall(f"{failure.decode() if failure else pid}\n".encode())
                pidfd = os.pidfd_open(pid)
                children[pidfd] = (pid, conn)
                selector.register(pidfd, selectors.EVENT_READ, "child")
            else:
                pidfd = key.fd
                pid, conn = children.pop(pidfd)
                selector.unregister(pidfd)
                os.close(pidfd)
                _, status = os.waitpid(pid, 0)
                try:
                    conn.sendall(f"{status}\n".encode())
                except OSError:  # the test let go of this process
                    pass
                conn.close()


def _receive(conn: socket.socket) -> tuple[dict | None, list[int]]:
    """A request and the three descriptors that came with it (None: the connection closed before it was whole)."""
    message, fds, _, _ = socket.recv_fds(conn, 1 << 16, 3)
    while message and not message.endswith(b"\n"):  # a stream: a long environment may come in pieces
        chunk = conn.recv(1 << 16)
        if not chunk:
            return None, fds
        message += chunk
    return (json.loads(message) if message else None), fds


def _read_all(fd: int) -> bytes:
    data = b""
    while chunk := os.read(fd, 4096):
        data += chunk
    os.close(fd)
    return data


def _enter(request: dict, fds: list[int]) -> None:
    """In the forked child: the command's session, signals, streams, directory and environment."""
    if request["new_session"]:
        os.setsid()
    for sig in request["ignored"]:
        signal.signal(sig, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_SETMASK, request["blocked"])
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        if fd > 2:
            os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    if os.environ.get("PYTHONUNBUFFERED"):
        sys.stdout.reconfigure(write_through=True)


def _run(request: dict) -> None:
    """The command, as `python ARGV` would run it."""
    import runpy

    argv = request["argv"]
    if argv[0] == "-m":
        sys.argv = [argv[1], *argv[2:]]
        sys.path[0] = os.getcwd()
        sys.modules.pop(argv[1], None)  # run as __main__, not found imported (as `python -m` finds it)
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(argv)
        sys.path[0] = str(Path(argv[0]).resolve().parent)
        runpy.run_path(argv[0], run_name="__main__")


if __name__ == "__main__":
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    early = [name for name in NOT_PRELOADED if name in sys.modules]
    early += [line.split()[-1] for line in Path("/proc/self/maps").read_text().splitlines() if "libiomp" in line]
    if early:
        sys.exit(f"the fork server imported {early}, which read their environment as they import: see RUNTIME_ENV")
    _run(_serve(sys.argv[1]))
