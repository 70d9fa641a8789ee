"""The study's pool room: where its runs train (slots), how they are launched and held (child processes or SLURM
jobs), and the study directory's lock.

The study's runs in flight over its slots: local child processes, each pinned to its slot's
cores or GPU, or SLURM jobs. A pool starts a run on a free slot, waits until some run ends, and on a stop signal
passes it on to its runs (each saves a checkpoint and exits) before the study stops. STUDY/.running names the runs
in flight, so a study killed outright leaves none training unseen (lmpt.study.pool.stop_left_run).

A study's runs as SLURM jobs (`study.launcher=slurm`), through submitit (`pip install "lmpt[slurm]"`): each run is
one job that starts `python -m lmpt ...` into the run's own directory and waits for it. A job SLURM stops ahead of
its time limit or on preemption (SIGUSR2) lets its run commit a checkpoint, then submitit requeues it and the run
resumes in the same directory. The study waits for its jobs; a study stopped or killed leaves them to SLURM, and the
same command waits for those still queued or running before it resumes the rest.

How a study holds its directory and its runs: each an ordinary `lmpt` run in a directory of its own, launched as a
child process (or a SLURM job) on one of the study's slots, with the study directory locked for the
study's life.

- A run directory launched with other run keys (another study's) is refused before anything trains.
- A stop signal to the study (SIGTERM, Ctrl-C) is passed on to its run as SIGTERM: the run saves a checkpoint and
  exits, then the study stops (lmpt.stopping.Stopped), and the same command resumes both.
- A study killed outright (kill -9) leaves no run behind: on Linux each run is told to stop (SIGTERM) when the study
  dies. Where that is not possible, or the run is still saving its checkpoint, the next launch of the study finds the
  run it left (STUDY/.running names it, and the run's own lock confirms it), stops it and waits for it to end, so
  two studies never train in one directory.

Where a study's runs train side by side: its slots, checked before any work. A slot holds one run at a time:

- on a CPU, a group of cores (this process's affinity split into `study.slots` groups): the run is pinned to its group
  and takes as many intra-op threads as the group has cores (LMPT_THREADS, which lmpt.train.placement obeys first);
- on a GPU, one visible GPU: the run sees only it (CUDA_VISIBLE_DEVICES), and takes an equal share of the cores as
  its threads;
- under `study.launcher=slurm`, one SLURM job at a time (submitit; lmpt.study.pool): `study.slots` bounds how
  many of the study's jobs are queued at once.

The runs' recipes are fixed before any run (lmpt.study.plan), so the slots change when a run trains, never what it
trains: the records are those of the serial study, in any order of completion."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from lmpt.console import console
from lmpt.cores import core_groups, describe_cores, usable_cores
from lmpt.errors import LmptError
from lmpt.locks import holder
from lmpt.rundir.directory import LOCK_FILE, lock_run_dir
from lmpt.stopping import Stopped
from lmpt.study.schema import StudyConfig
from lmpt.train.placement import FORCE_VAR

SLURM_POLL_S = 5.0
"""How often a SLURM study asks whether its jobs ended (submitit caches SLURM's answers about as long)."""


@dataclass(frozen=True)
class Launch:
    """One run the study trains: a search trial (`trial` its index) or a final run (`budget` and `seed`)."""

    name: str
    """In words, for the console: "search clm trial 1/6", "final clm seed 0 at 1e13flops"."""
    path: Path
    command: list[str]
    objective: str
    trial: int | None = None
    budget: str | None = None
    seed: int | None = None


def _start_in_slot(slot: Slot) -> None:
    """In the child, before lmpt starts: stop when the study dies (Linux), and keep to the slot's cores."""
    stop_with_study()
    if slot.cores is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, slot.cores)


class LocalPool:
    """Runs as child processes of the study, one per slot. One slot: the run's output is the study's, as a serial
    study shows it; several: each run's console is its own lmpt.log, and the study says when each starts and ends."""

    def __init__(self, study_dir: Path, slots: list[Slot]) -> None:
        self.study_dir = study_dir
        self.slots = slots
        self._busy: dict[int, tuple[Launch, subprocess.Popen]] = {}

    @property
    def free(self) -> int:
        return len(self.slots) - len(self._busy)

    @property
    def side_by_side(self) -> bool:
        """Whether runs may train at once (the console then says where each runs and when it ends)."""
        return len(self.slots) > 1

    @property
    def running(self) -> int:
        return len(self._busy)

    def start(self, launch: Launch) -> str:
        """Start `launch` on a free slot; the slot's name. A run directory another process holds is refused."""
        holder = lock_holder(launch.path)
        if holder is not None:
            raise LmptError(
                f"{launch.path} is in use by another lmpt process (PID {holder}): wait for it to end or "
                "stop it, then run the same command"
            )
        index = next(i for i in range(len(self.slots)) if i not in self._busy)
        slot = self.slots[index]
        quiet = len(self.slots) > 1  # runs side by side: their progress lines would interleave
        child = subprocess.Popen(
            launch.command,
            env={**os.environ, **slot.env},
            preexec_fn=(lambda: _start_in_slot(slot)) if sys.platform.startswith("linux") else None,
            stdout=subprocess.DEVNULL if quiet else None,
        )
        self._busy[index] = (launch, child)
        self._write()
        return slot.name

    def wait(self) -> list[tuple[Launch, int | None]]:
        """Block until at least one run ends; the runs that ended, with their exit codes."""
        while True:
            ended = [(i, launch, child.poll()) for i, (launch, child) in self._busy.items()]
            done = [(i, launch, code) for i, launch, code in ended if code is not None]
            if done:
                for i, _, _ in done:
                    del self._busy[i]
                self._write()
                return [(launch, code) for _, launch, code in done]
            self._block()

    def _block(self) -> None:
        """Sleep until a child process ends (without reaping it: Popen reads its code), or briefly elsewhere."""
        if len(self._busy) == 1:
            ((_, child),) = self._busy.values()
            child.wait()
            return
        try:
            os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOWAIT)
        except (AttributeError, ChildProcessError):
            time.sleep(0.2)
            return
        time.sleep(0.01)  # a child of another kind ended: do not spin on it

    def stop(self) -> None:
        """On a stop signal: each run is told to stop (SIGTERM: it saves a checkpoint), then waited for."""
        for _, child in self._busy.values():
            with contextlib.suppress(ProcessLookupError):
                child.send_signal(signal.SIGTERM)  # a Ctrl-C reached it already: a SIGTERM beside it does not abort it
        for i, (_, child) in list(self._busy.items()):
            with contextlib.suppress(Stopped):  # a second signal: the run still ends on its own
                child.wait()
            if child.poll() is not None:  # a run still saving its checkpoint stays named for the next launch
                del self._busy[i]
        self._write()

    def _write(self) -> None:
        write_running(
            self.study_dir, [{"pid": child.pid, "run": str(launch.path)} for launch, child in self._busy.values()]
        )


class SlurmPool:
    """Runs as SLURM jobs through submitit, at most `slots` queued or running at once."""

    def __init__(self, study_dir: Path, slots: int, parameters: dict[str, Any]) -> None:
        from lmpt.study.pool import JOBS_FOLDER, make_executor

        self.study_dir = study_dir
        self.slots = slots
        self.executor = make_executor(study_dir / JOBS_FOLDER, parameters)
        self._jobs: list[tuple[Launch, Any]] = []

    @property
    def free(self) -> int:
        return self.slots - len(self._jobs)

    side_by_side = True

    @property
    def running(self) -> int:
        return len(self._jobs)

    def start(self, launch: Launch) -> str:
        """Submit `launch` as a job; its name ("SLURM job ID")."""
        from lmpt.study.pool import SlurmRun

        try:
            job = self.executor.submit(SlurmRun(launch.command))
        except Exception as exc:  # sbatch's refusal, raised by submitit with sbatch's stderr
            from lmpt.train.slurm import sbatch_refusal

            raise LmptError(sbatch_refusal(exc) or f"sbatch failed: {str(exc).strip().splitlines()[-1]}") from None
        self._jobs.append((launch, job))
        self._write()
        return f"SLURM job {job.job_id}"

    def wait(self) -> list[tuple[Launch, int | None]]:
        """Block until at least one job ends; the runs whose jobs ended (their exit codes are in their records)."""
        while True:
            ended = [job.done() for _, job in self._jobs]
            if any(ended):
                done = [launch for (launch, _), end in zip(self._jobs, ended, strict=True) if end]
                self._jobs = [pair for pair, end in zip(self._jobs, ended, strict=True) if not end]
                self._write()
                return [(launch, None) for launch in done]
            time.sleep(SLURM_POLL_S)

    def stop(self) -> None:
        """On a stop signal: the jobs are SLURM's and keep going; STUDY/.running names them, and the same command
        waits for them before it resumes the study."""
        if self._jobs:
            console.print(
                f"{len(self._jobs)} SLURM job(s) keep running: {', '.join(job.job_id for _, job in self._jobs)}"
            )

    def _write(self) -> None:
        write_running(self.study_dir, [{"job": job.job_id, "run": str(launch.path)} for launch, job in self._jobs])


JOBS_FOLDER = ".submitit"
"""STUDY/.submitit/JOB: submitit's files (the job's script, its logs) for each of the study's jobs."""
DEFAULT_PARAMETERS: dict[str, Any] = {"time": 240, "cpus_per_task": 1}
"""A job's sbatch options unless study.slurm gives them: 4 hours, one CPU (a GPU slot asks for one GPU too)."""


def require_submitit() -> None:
    """A SLURM study without submitit installed is refused in one line."""
    try:
        import submitit  # noqa: F401
    except ImportError:
        raise LmptError(
            "study.launcher=slurm sends each run to SLURM through submitit, which is not installed: "
            'pip install "lmpt[slurm]"'
        ) from None


def job_parameters(given: Any, gpu: bool) -> dict[str, Any]:
    """The sbatch options of every job: DEFAULT_PARAMETERS, one GPU for a GPU slot, then study.slurm's (submitit's
    SlurmExecutor names: partition, time, cpus_per_task, gpus_per_node, mem, account, ...); an unknown name or no
    SLURM here is refused in one line."""
    from submitit import SlurmExecutor

    parameters = {**DEFAULT_PARAMETERS, **({"gpus_per_node": 1} if gpu else {}), **dict(given or {})}
    unknown = sorted(set(parameters) - SlurmExecutor._valid_parameters() - {"max_num_timeout"})
    if unknown:
        raise LmptError(
            f"study.slurm: {', '.join(unknown)} is no sbatch option submitit knows: use partition, time, "
            "cpus_per_task, gpus_per_node, mem, account, signal_delay_s, max_num_timeout, ..."
        )
    with tempfile.TemporaryDirectory() as folder:  # a check only: the study's own folder is made once it runs
        try:
            make_executor(Path(folder), parameters)
        except (RuntimeError, ValueError, TypeError) as exc:
            raise LmptError(f"study.launcher=slurm: {exc}") from None
    return parameters


def make_executor(folder: Path, parameters: dict[str, Any]) -> Any:
    """A submitit SlurmExecutor writing into `folder`, its jobs sent with `parameters`."""
    from submitit import SlurmExecutor

    options = {k: v for k, v in parameters.items() if k != "max_num_timeout"}
    executor = SlurmExecutor(folder=str(folder / "%j"), max_num_timeout=int(parameters.get("max_num_timeout", 3)))
    executor.update_parameters(**options)
    return executor


class SlurmRun:
    """What a job runs: one lmpt run, as a child process, with the job's CPUs as its threads. submitit calls
    `checkpoint` on SIGUSR2 (a time limit or a preemption ahead): the run commits a checkpoint and exits, and the job
    is requeued to continue it in the same directory."""

    def __init__(self, command: list[str]) -> None:
        self.command = command
        self._child: subprocess.Popen | None = None

    def __call__(self) -> int:
        """Run the command to its end; its exit code (the run directory records the rest)."""
        env = dict(os.environ)
        env.setdefault(FORCE_VAR, os.environ.get("SLURM_CPUS_PER_TASK", "1"))  # the job's CPUs, not the node's
        self._child = subprocess.Popen(self.command, env=env)
        return self._child.wait()

    def checkpoint(self) -> Any:
        """Let the run commit its checkpoint and end (SLURM's SIGUSR2 reached it too; passed on in case it did
        not), then requeue the same run."""
        from submitit.helpers import DelayedSubmission

        if self._child is not None:
            with contextlib.suppress(ProcessLookupError):
                self._child.send_signal(signal.SIGUSR2)
            self._child.wait()
        return DelayedSubmission(SlurmRun(self.command))

    def __getstate__(self) -> dict[str, Any]:
        return {"command": self.command, "_child": None}  # a process does not travel with the job


def job_active(folder: Path, job_id: str) -> bool:
    """Whether the study's job `job_id` is still queued or running (SLURM's view, through submitit)."""
    from submitit import SlurmJob

    return not SlurmJob(folder=str(folder / "%j"), job_id=job_id).done()


RUNNING = ".running"
"""STUDY/.running: the runs the study is training now (each run's process or SLURM job, and its directory), rewritten
as they start and end, removed when none is left."""
STOP_WAIT_S = 300.0
"""How long a run left by a killed study may take to save its checkpoint and end before it is killed."""


def lock_holder(directory: Path) -> int | None:
    """The PID holding `directory`'s lock (lmpt.rundir.directory), or None when nobody holds it."""
    text = holder(directory / LOCK_FILE)
    if text is None:
        return None
    return int(text) if text.isdecimal() else -1


def lock_study(directory: Path) -> None:
    """Hold the study directory for this process: a second study there is refused in one line."""
    holder = lock_holder(directory)
    if holder is None:
        with contextlib.suppress(LmptError):  # taken in between: said below with the holder's PID
            lock_run_dir(directory)
            return
        holder = lock_holder(directory)
    raise LmptError(
        f"{directory} is in use by another lmpt-study (PID {holder}): wait for it to end or stop it, or "
        "pick another study.dir"
    )


def left_runs(study_dir: Path) -> list[dict[str, str | int]]:
    """What STUDY/.running names: one entry per run ({"pid", "run"} or, under SLURM, {"job", "run"}); a study of one
    slot at a time wrote a single entry."""
    try:
        left = json.loads((study_dir / RUNNING).read_text())
    except (OSError, ValueError):
        return []
    entries = left if isinstance(left, list) else [left]
    return [e for e in entries if isinstance(e, dict) and "run" in e and ("pid" in e or "job" in e)]


def write_running(study_dir: Path, entries: list[dict[str, str | int]]) -> None:
    """Name the runs the study trains now in STUDY/.running (removed when there is none)."""
    path = study_dir / RUNNING
    if entries:
        path.write_text(json.dumps(entries) + "\n")
    else:
        path.unlink(missing_ok=True)


def _stop_left_process(pid: int, run: Path) -> None:
    if lock_holder(run) != pid:  # it ended, or the PID is another process's now
        return
    console.print(f"stopping the run a killed study left training in {run} (PID {pid}): it saves a checkpoint first")
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_WAIT_S
    while lock_holder(run) == pid:
        if time.monotonic() > deadline:  # a run's checkpoints are committed whole: killing it loses no saved step
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.2)


def _wait_for_left_job(study_dir: Path, job: str, run: Path) -> None:
    from lmpt.study.pool import JOBS_FOLDER, job_active

    if not job_active(study_dir / JOBS_FOLDER, job):
        return
    console.print(f"waiting for SLURM job {job}, which a stopped study left training {run}")
    while job_active(study_dir / JOBS_FOLDER, job):
        time.sleep(5)


def stop_left_run(study_dir: Path) -> None:
    """Stop the runs a killed study left training (STUDY/.running, each under the study's own folder and confirmed by
    the run's lock) and wait for
    them to end, so this study continues them instead of training beside them; a SLURM job it left is waited for
    (its run ends, or commits a checkpoint and is requeued by SLURM, on its own)."""
    home = study_dir.resolve()
    for entry in left_runs(study_dir):
        run = Path(str(entry["run"]))
        if not run.resolve().is_relative_to(home):  # never a run outside the study's own folder, whatever it names
            console.print(f"{study_dir / RUNNING} names {run}, outside the study: left alone")
            continue
        try:
            if "job" in entry:
                _wait_for_left_job(study_dir, str(entry["job"]), Path(str(entry["run"])))
            else:
                _stop_left_process(int(entry["pid"]), Path(str(entry["run"])))
        except (ValueError, TypeError):
            continue
    (study_dir / RUNNING).unlink(missing_ok=True)


def refuse_another_run(
    path: Path, command: list[str], elsewhere: str = "another study's run; pick another study.dir"
) -> None:
    """A run directory launched with other run keys (another study's, or a trial of another recipe), or holding files
    without the keys it was launched with (a run copied in without its `.hydra/`), is not reused: the study says so
    before training anything. A run is known by its saved keys, never by where it lies."""
    overrides_file = path / ".hydra" / "overrides.yaml"
    if not overrides_file.exists():
        if path.is_dir() and any(path.iterdir()):
            raise LmptError(
                f"{path} holds files but not the keys it was launched with (.hydra/overrides.yaml): it cannot be told "
                f"from {elsewhere.split(';')[0]}; move it away"
            )
        return
    given = set(command[3:-1])  # the run keys: the command less `python -m lmpt` and hydra.run.dir
    saved = {str(o) for o in OmegaConf.load(overrides_file)}
    if saved != given:
        differ = sorted(saved ^ given)[:4]
        raise LmptError(
            f"{path} was launched with other run keys ({', '.join(differ)} differ): it is {elsewhere} or move it away"
        )


def stop_with_study() -> None:
    """In the child, before lmpt starts (Linux): SIGTERM when the study dies, however it dies."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


GPUS_VAR = "LMPT_STUDY_GPUS"
"""The GPUs a study's slots use, as CUDA_VISIBLE_DEVICES names them (`0,1,3`); unset: every GPU torch sees. Also the
seam the tests fill with a fake list on a machine without GPUs."""
LAUNCHERS = ("local", "slurm")
SLOT_DEVICES = ("auto", "cpu", "gpu")
SLURM_AUTO = 256
"""How many SLURM jobs study.slots=auto queues at once (submitit's own default bound on a job array)."""


@dataclass(frozen=True)
class Slot:
    """One place a run trains: the environment it adds to the run's and, on a CPU, the cores it is pinned to."""

    name: str
    """In words, for the console: "cores 0-3", "GPU 1", "SLURM"."""
    env: dict[str, str] = field(default_factory=dict)
    cores: frozenset[int] | None = None
    """The CPU affinity of the run (None: left as the study's)."""


def visible_gpus(env: Mapping[str, str] | None = None) -> list[str]:
    """The GPUs the study may use, by the name CUDA_VISIBLE_DEVICES gives each: LMPT_STUDY_GPUS when set, else
    torch's devices (through the study's own CUDA_VISIBLE_DEVICES, when it has one)."""
    env = os.environ if env is None else env
    given = env.get(GPUS_VAR, "").strip()
    if given:
        return [g.strip() for g in given.split(",") if g.strip()]
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    names = [n.strip() for n in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if n.strip()]
    return names[:count] if names else [str(i) for i in range(count)]


def _count(value: object, most: int, what: str) -> int:
    """study.slots as a number of slots (auto: `most`); more than `most` refused in one line naming `what`."""
    text = str(value).strip()
    if text == "auto":
        return most
    if not text.isdecimal() or int(text) < 1:
        raise LmptError(f"study.slots={text} is no number of slots: give a whole number of at least 1, or auto")
    if int(text) > most:
        raise LmptError(f"study.slots={text} asks for more slots than {what}: give at most {most}, or study.slots=auto")
    return int(text)


def plan_slots(study: StudyConfig, cores: Callable[[], list[int]] | None = None) -> list[Slot]:
    """The slots `study` (its `slots`, `slot_device` and `launcher`) asks for on this machine; LmptError (one line,
    exit 2) for more slots than cores or GPUs, a GPU slot on a machine without one, or a SLURM study without
    submitit. `cores`: this process's usable cores (default: its CPU affinity)."""
    launcher, device = str(study.launcher), str(study.slot_device)
    if launcher not in LAUNCHERS:
        raise LmptError(f"study.launcher={launcher} must be one of {', '.join(LAUNCHERS)}")
    if device not in SLOT_DEVICES:
        raise LmptError(f"study.slot_device={device} must be one of {', '.join(SLOT_DEVICES)}")
    if launcher == "slurm":
        from lmpt.study.pool import require_submitit

        require_submitit()
        text = str(study.slots).strip()
        if text != "auto" and (not text.isdecimal() or int(text) < 1):
            raise LmptError(f"study.slots={text} is no number of jobs: give a whole number of at least 1, or auto")
        return [Slot("SLURM")] * (int(text) if text != "auto" else SLURM_AUTO)
    gpus = visible_gpus() if device != "cpu" else []
    if device == "gpu" and not gpus:
        raise LmptError(
            f"study.slot_device=gpu but this machine shows no GPU (torch sees none and {GPUS_VAR} is "
            "unset): drop study.slot_device, or give study.slot_device=cpu"
        )
    mine = sorted(cores() if cores is not None else _affinity())
    if gpus:
        n = _count(study.slots, len(gpus), f"the {len(gpus)} visible GPU(s) ({','.join(gpus)})")
        share = str(max(1, len(mine) // n))  # the host threads of runs side by side: an equal share of the cores
        return [Slot(f"GPU {g}", {"CUDA_VISIBLE_DEVICES": g, FORCE_VAR: share}) for g in gpus[:n]]
    n = _count(study.slots, len(mine), f"the {len(mine)} core(s) this process may run on")
    if n == 1:  # the serial study: each run takes its threads as lmpt alone does
        return [Slot("serial")]
    return [Slot(describe_cores(g), {FORCE_VAR: str(len(g))}, frozenset(g)) for g in core_groups(mine, n)]


def _affinity() -> list[int]:
    """This process's usable cores by number (their count alone where the platform tells no affinity)."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(usable_cores()))
