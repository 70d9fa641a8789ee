"""One launch of the real command: watched through what the run exposes (its `lmpt.log` lines as they are
flushed, `checkpoints/` staging directories), killed at the moment aimed at, and the kill's landing named."""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from chaos_harness.cases import CKPT_EVERY, EVAL_EVERY, MAX_STEPS

STEP_LINE = re.compile(r"^(eval )?step\s+(\d+)")
CACHE_BUILD = ("training a", "tokenising")
"""lmpt.log lines that open a cache build (tokenizer training, tokenising); "token cache ..." closes it."""
TRAINING = ("step", "evaluation", "checkpoint write")
"""Phases inside the training loop, where a stop signal is handled gracefully."""
SCORING = "scoring"
"""The downstream scoring after training, where a stop signal is handled gracefully too (exit 75, status.json
preempted in phase scoring)."""
SCORING_LINES = ("scoring ", "downstream (logged")
"""lmpt.log lines of the scoring: a task started ("scoring NAME"), the figures' table; and a task kept from an
interrupted scoring ("NAME: kept as scored before the stop")."""
POLL_S = 0.002


@dataclass
class Calibration:
    """Seconds measured on the case's uninterrupted run with the harness's clock as its lmpt.log grew."""

    startup: float = 3.0
    """Launch to the first step, a cache build excluded."""
    cache_build: float = 2.0
    """The first cache-build line to "token cache"."""
    training: float = 2.0
    """The first step line to the last."""
    scoring: float = 2.0
    """The first scoring line to the command's exit."""


@dataclass
class Landing:
    """A signal sent and what it hit."""

    signal: str
    phase: str
    returncode: int
    graceful: bool = False
    """A SIGTERM that stopped the run with a committed checkpoint of the step it stopped at."""
    problems: list[str] = field(default_factory=list)


class Attempt:
    """The command running in a session of its own, as a job step would."""

    def __init__(self, command: list[str], run_dir: Path, env: dict[str, str], output: Path) -> None:
        self.run_dir, self.log = run_dir, run_dir / "lmpt.log"
        self.offset = self.log.stat().st_size if self.log.exists() else 0
        self.lines: list[str] = []
        """This attempt's lmpt.log lines, timestamps stripped."""
        self.seen: dict[str, float] = {}
        """Event ("launch", "cache", "cache done", "step", "last step") -> when it was first seen."""
        self._partial = ""
        self.leftovers = set(_staging(run_dir / "checkpoints"))
        """Staging folders an earlier, killed launch left behind: not this launch's checkpoint writes."""
        self.output = open(output, "w")
        self.orphans: list[int] = []
        """Processes of the command still running 2 minutes after it ended (killed then)."""
        self.seen["launch"] = time.monotonic()
        self.process = subprocess.Popen(
            command, cwd=run_dir.parent, env=env, stdout=self.output, stderr=subprocess.STDOUT, start_new_session=True
        )

    def poll(self) -> bool:
        """Take in the lines lmpt.log gained; True while the command runs."""
        running = self.process.poll() is None
        try:
            with open(self.log, "rb") as f:
                if os.fstat(f.fileno()).st_size < self.offset:  # started over in a fresh file
                    self.offset = 0
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            data = b""
        self.offset += len(data)
        *complete, self._partial = (self._partial + data.decode("utf-8", "replace")).split("\n")
        now = time.monotonic()
        for line in complete:
            body = line.split(" ", 1)[1] if " " in line else line
            self.lines.append(body)
            if body.startswith(CACHE_BUILD):
                self.seen.setdefault("cache", now)
            elif body.startswith("token cache"):
                self.seen.setdefault("cache done", now)
            elif body.startswith(SCORING_LINES) or ": kept as scored before the stop" in body:
                self.seen.setdefault("scoring", now)
            elif (mark := STEP_LINE.match(body)) and not mark.group(1):
                self.seen.setdefault("step", now)
                self.seen["last step"] = now
        return running

    def steps(self) -> list[tuple[bool, int]]:
        """(is an evaluation line, step) for every step and evaluation line so far."""
        return [(m.group(1) is not None, int(m.group(2))) for m in map(STEP_LINE.match, self.lines) if m]

    def landed(self) -> str:
        """Where the command is now, from its log and checkpoints/ (exact after kill -9: nothing moves)."""
        checkpoints = self.run_dir / "checkpoints"
        if set(_staging(checkpoints)) - self.leftovers:
            return "checkpoint write"
        if "scoring" in self.seen:  # until the run says completed; after that, the run's end ("final save")
            return "final save" if read_status(self.run_dir).get("status") == "completed" else SCORING
        marks = self.steps()
        if not marks:
            return "cache build" if "cache" in self.seen and "cache done" not in self.seen else "start-up"
        evaluated, step = marks[-1]
        if not evaluated and (step % EVAL_EVERY == 0 or step == MAX_STEPS):
            return "evaluation"
        if (step % CKPT_EVERY == 0 or step == MAX_STEPS) and not (checkpoints / f"step_{step:08d}").is_dir():
            return "checkpoint write"
        return "final save" if step == MAX_STEPS else "step"

    def tree(self) -> list[int]:
        """The command and every process under it (torchrun starts each rank in a session of its own)."""
        found, todo = [], [self.process.pid]
        while todo:
            pid = todo.pop()
            found.append(pid)
            for task in Path(f"/proc/{pid}/task").glob("*/children"):
                with contextlib.suppress(OSError):
                    todo += [int(child) for child in task.read_text().split()]
        return found

    def finish(self, timeout: float = 600, tree: list[int] | None = None) -> int:
        """Wait for the command and every process of `tree` (default: its tree now); its exit status. A process
        that outlives the command by 2 minutes (it would hold the run's lock) is killed and reported."""
        tree = tree or self.tree()
        try:
            code = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill(self.tree(), signal.SIGKILL)
            code = self.process.wait()
        deadline = time.monotonic() + 120
        while _alive(tree) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.orphans = _alive(tree)
        _kill(self.orphans, signal.SIGKILL)
        self.poll()
        self.output.close()
        return code


def _staging(checkpoints: Path) -> list[str]:
    """The unfinished checkpoint folders (staging, or being pruned) in `checkpoints/`."""
    if not checkpoints.is_dir():
        return []
    return [p.name for p in checkpoints.iterdir() if p.name.startswith((".tmp-", ".trash-"))]


def _alive(pids: list[int]) -> list[int]:
    """Those of `pids` still running (a zombie, dead but not yet reaped, is not)."""
    running = []
    for pid in pids:
        with contextlib.suppress(OSError):
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                running.append(pid)
    return running


def _kill(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def _deadline(target: str, attempt: Attempt, rng: random.Random, calibration: Calibration) -> float | None:
    """When to strike at `target`, once what it waits for has been seen; None while still waiting."""
    seen, now = attempt.seen, time.monotonic()
    if target == "start-up":
        return seen["launch"] + rng.uniform(0.1, 0.95) * calibration.startup
    if target == "cache build" and "step" not in seen and "cache done" not in seen:
        return seen["cache"] + rng.uniform(0, 0.9 * calibration.cache_build) if "cache" in seen else None
    if target == "evaluation":
        marks = attempt.steps()
        return now if marks and not marks[-1][0] and marks[-1][1] % EVAL_EVERY == 0 else None
    if target == "checkpoint write":
        return now if set(_staging(attempt.run_dir / "checkpoints")) - attempt.leftovers else None
    if target == SCORING:
        return seen["scoring"] + rng.uniform(0, 0.9 * calibration.scoring) if "scoring" in seen else None
    if "step" not in seen:  # "step", or a cache build that was already done
        return None
    left = MAX_STEPS - attempt.steps()[-1][1]
    return now + rng.uniform(0, 0.9 * calibration.training * left / MAX_STEPS)


def aim(attempt: Attempt, target: str, rng: random.Random, calibration: Calibration) -> bool:
    """Wait until the moment aimed at; False when the command ended first."""
    deadline = None
    while attempt.poll():
        if deadline is None:
            deadline = _deadline(target, attempt, rng, calibration)
        if deadline is not None and time.monotonic() >= deadline:
            return True
        time.sleep(POLL_S)
    return False


def strike(attempt: Attempt, sig: signal.Signals, torchrun: bool) -> Landing:
    """kill -9 every process of the command (a node lost), or SIGTERM the command (a scheduler's stop), and check
    what a stop must leave: a graceful stop exits 75 with a committed checkpoint of the step it stopped at.
    torchrun turns any SIGTERM into its own exit 1 (SignalException), after its ranks exited."""
    attempt.poll()
    at_signal, tree = attempt.landed(), attempt.tree()
    _kill(tree if sig == signal.SIGKILL else tree[:1], sig)
    code = attempt.finish(tree=tree)
    landing = Landing(sig.name, attempt.landed() if sig == signal.SIGKILL else at_signal, code)
    if attempt.orphans:
        landing.problems.append(f"{len(attempt.orphans)} process(es) outlived the command by 2 minutes")
    if sig == signal.SIGTERM:
        landing.problems += _graceful_problems(attempt, landing, torchrun)
        landing.graceful = landing.phase in (*TRAINING, SCORING) and not landing.problems
    return landing


def _graceful_problems(attempt: Attempt, landing: Landing, torchrun: bool) -> list[str]:
    """What a SIGTERM inside the training loop failed to do (outside it, lmpt has no handler: it just stops)."""
    status = read_status(attempt.run_dir)
    if status.get("status") == "completed" and status.get("step") == MAX_STEPS:  # it came as the run ended
        ended = (1 if torchrun else 0, -signal.SIGTERM)  # -15: in the exit, after the run's last word
        finished = landing.returncode in ended and (attempt.run_dir / "model.safetensors").exists()
        return [] if finished else [f"completed, yet exited {landing.returncode}"]
    if landing.phase == SCORING:
        return _scoring_stop_problems(attempt, landing, status, torchrun)
    if landing.phase not in TRAINING:  # torchrun's own handler, once installed, makes it exit 1
        stopped = (-signal.SIGTERM, 1) if torchrun else (-signal.SIGTERM,)
        return [] if landing.returncode in stopped else [f"exit {landing.returncode} ({landing.phase})"]
    code = 1 if torchrun else 75
    problems = [] if landing.returncode == code else [f"SIGTERM in {landing.phase} exited {landing.returncode}"]
    if status.get("status") != "preempted":
        problems.append(f"status.json says {status.get('status')!r}, not 'preempted'")
    elif status["step"] != max((step for _, step in attempt.steps()), default=None):
        problems.append(f"status.json names step {status['step']}, the log stops at another")
    elif not (attempt.run_dir / "checkpoints" / f"step_{status['step']:08d}" / "manifest.json").exists():
        problems.append(f"no committed checkpoint of step {status['step']}, where it stopped")
    return problems


def _scoring_stop_problems(attempt: Attempt, landing: Landing, status: dict, torchrun: bool) -> list[str]:
    """What a SIGTERM during the scoring failed to do: exit 75 with status.json preempted in phase scoring at the
    last step, naming only tasks whose records are whole."""
    code = 1 if torchrun else 75
    problems = [] if landing.returncode == code else [f"SIGTERM in scoring exited {landing.returncode}"]
    said = (status.get("status"), status.get("phase"), status.get("step"))
    if said != ("preempted", SCORING, MAX_STEPS):
        problems.append(f"status.json says {said}, not preempted in scoring at step {MAX_STEPS}")
    return problems + record_problems(attempt.run_dir, status.get("recorded") or [])


def read_status(run_dir: Path) -> dict:
    """status.json, or {} when there is none (or it is not whole JSON: lmpt writes it atomically, so never)."""
    try:
        status = json.loads((run_dir / "status.json").read_text())
    except (OSError, ValueError):
        return {}
    return status if isinstance(status, dict) else {}


def record_problems(run_dir: Path, tasks: list[str]) -> list[str]:
    """Those of `tasks` (said to be recorded) whose RUN/downstream/TASK.json is missing or not whole JSON."""
    problems = []
    for task in tasks:
        try:
            json.loads((run_dir / "downstream" / f"{task}.json").read_text())
        except (OSError, ValueError):
            problems.append(f"the record of {task}, said to be recorded, is missing or torn")
    return problems
