"""A case under fire: its uninterrupted (golden) run, then rounds of kill, resume, kill again ... finish, each
round compared with the golden run bit for bit (logged losses, final weights, token cache, the downstream records
and figures). A kill during the scoring must leave status.json saying the run is unfinished, and every task record
the scoring's ledger names must reach the end of the round untouched (kept, not scored again)."""

from __future__ import annotations

import hashlib
import json
import random
import signal
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from chaos_harness.attempt import (
    POLL_S,
    SCORING,
    Attempt,
    Calibration,
    Landing,
    aim,
    read_status,
    record_problems,
    strike,
)
from chaos_harness.cases import Case

_TESTS = Path(__file__).resolve().parents[2] / "tests"
sys.path[:0] = [str(_TESTS / "train"), str(_TESTS)]  # golden.py imports tests/runner.py as `runner`
from golden import assert_same, env  # noqa: E402  (the golden-run comparison the resume tests use)

from lmpt.rundir.checkpoint import manifest_problem  # noqa: E402

KILLS_PER_ROUND = 10
"""Kills before a round is let finish. The first round starts from an empty token cache (tokenizer training and
tokenising are killed there, at most CACHE_KILLS times); later rounds reuse the cache it built."""
CACHE_KILLS = 2


@dataclass
class CaseResult:
    """What one case went through."""

    name: str
    kills: list[dict] = field(default_factory=list)
    resumes: int = 0
    rounds: int = 0
    problems: list[str] = field(default_factory=list)
    same_sha256: bool = True
    """Every finished run's model.safetensors byte-identical to the golden one (not only equal tensors)."""

    @property
    def phases(self) -> Counter:
        return Counter(k["phase"] for k in self.kills)

    @property
    def verdict(self) -> str:
        return "differs" if self.problems else "identical"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


TIMINGS = ("build_seconds",)
"""meta.json keys that say how long a build took, not what it built."""


def _content(path: Path) -> str:
    if path.name != "meta.json":
        return _sha256(path)
    meta = json.loads(path.read_text())
    return json.dumps({key: value for key, value in meta.items() if key not in TIMINGS}, sort_keys=True)


def cache_files(cache: Path) -> dict[str, str]:
    """Relative path -> content (sha256; meta.json without its timings) of every tokenizer and token-cache file."""
    return {
        str(p.relative_to(cache)): _content(p)
        for part in ("tokenizers", "tokens")
        for p in sorted((cache / part).rglob("*"))
        if p.is_file()
    }


def golden(case: Case, work: Path, source: Path | None) -> tuple[Path, Calibration]:
    """The case run once, never stopped, from an empty cache; the phase lengths it took."""
    folder = work / case.name
    folder.mkdir(parents=True, exist_ok=True)
    run_dir = folder / "golden"
    args = [*case.args(work, source), f"hydra.run.dir={run_dir}"]
    environment = env(LMPT_CACHE_DIR=str(folder / "golden-cache"))
    attempt = Attempt(case.command(args), run_dir, environment, folder / "golden.out")
    while attempt.poll():
        time.sleep(POLL_S)
    ended = time.monotonic()
    code = attempt.finish()
    if code != 0:
        raise SystemExit(f"{case.name}: the uninterrupted run failed (exit {code}), see {folder / 'golden.out'}")
    seen = attempt.seen
    cache = seen.get("cache done", seen["launch"]) - seen.get("cache", seen["launch"])
    return run_dir, Calibration(
        startup=seen["step"] - seen["launch"] - cache,
        cache_build=cache or 1.0,
        training=seen["last step"] - seen["step"],
        scoring=ended - seen.get("scoring", ended) or 1.0,
    )


AIMS = {"start-up": 2, "cache build": 0, "step": 4, "evaluation": 2, "checkpoint write": 2, SCORING: 2}
"""The phases a kill can be aimed at, and how often each is picked once the token cache is built."""


def _target(rng: random.Random, cache_built: bool, cache_kills: int, aims: list[str]) -> str:
    if "cache build" in aims and not cache_built and cache_kills < CACHE_KILLS and rng.random() < 0.8:
        return "cache build"
    others = [a for a in aims if a != "cache build"] or ["step"]
    return rng.choices(others, weights=[AIMS[a] for a in others])[0]


def _resume_problem(attempt: Attempt, latest: str | None) -> str | None:
    """A restart must continue from the newest committed checkpoint, or start afresh when there is none."""
    resumed = [line for line in attempt.lines if line.startswith("resuming ") and " from step_" in line]
    if latest is None or not attempt.steps():
        return None
    if not resumed or not resumed[0].split(" from ")[1].startswith(latest):
        return f"after a kill with {latest} committed the restart said {resumed[:1] or 'nothing of resuming'}"
    return None


def soak(
    case: Case,
    kills: int,
    work: Path,
    source: Path | None,
    rng: random.Random,
    sigterm: float,
    aims: list[str],
    console: Console,
) -> CaseResult:
    """`kills` kills of `case` in rounds, aimed at `aims`; each finished round compared with the golden run."""
    reference, calibration = golden(case, work, source)
    result = CaseResult(case.name)
    while len(result.kills) < kills:
        result.rounds += 1
        folder = work / case.name / f"round-{result.rounds}"
        run_dir = folder / "run"
        environment = env(LMPT_CACHE_DIR=str(work / case.name / "round-1" / "cache"))
        folder.mkdir(parents=True)
        cache_built, latest, round_kills = result.rounds > 1, None, 0
        kept: dict[str, bytes] = {}  # task -> its record as a scoring kill left it: it must end the round untouched
        for n in range(KILLS_PER_ROUND + 1):
            resume = latest is not None and rng.random() < 0.5  # `lmpt trainer.resume=RUN` or the same command
            args = [f"trainer.resume={run_dir}"] if resume else [*case.args(work, source), f"hydra.run.dir={run_dir}"]
            attempt = Attempt(case.command(args), run_dir, environment, folder / f"attempt-{n}.out")
            striking = round_kills < KILLS_PER_ROUND and len(result.kills) < kills
            cache_kills = sum(k["phase"] == "cache build" for k in result.kills)
            if striking and aim(attempt, _target(rng, cache_built, cache_kills, aims), rng, calibration):
                sig = signal.SIGTERM if rng.random() < sigterm else signal.SIGKILL
                landing = strike(attempt, sig, torchrun=case.processes > 1)
            else:
                landing = Landing("none", "finished", attempt.finish())
            cache_built = cache_built or "cache done" in attempt.seen or bool(attempt.steps())
            result.resumes += any(line.startswith("resuming ") and " from step_" in line for line in attempt.lines)
            problem = _resume_problem(attempt, latest)
            if problem:
                result.problems.append(f"round {result.rounds}, attempt {n}: {problem}")
            committed = sorted(p for p in (run_dir / "checkpoints").glob("step_*") if (p / "manifest.json").exists())
            torn = [f"{p.name}: {why}" for p in committed if (why := manifest_problem(p))]
            latest = committed[-1].name if committed else None
            landing.problems += [f"a committed checkpoint is torn: {t}" for t in torn]
            if landing.signal == "none":
                if landing.returncode != 0:
                    result.problems.append(f"round {result.rounds}: the finishing run exited {landing.returncode}")
                break
            if landing.phase == SCORING:
                landing.problems += _scoring_kill_problems(run_dir, kept)
            round_kills += 1
            result.kills.append({"round": result.rounds, "attempt": n, **vars(landing)})
            console.print(
                f"{case.name} round {result.rounds}: {landing.signal} in {landing.phase}, exit {landing.returncode}"
                + "".join(f" [bold red]{p}[/]" for p in landing.problems)
            )
            result.problems += [f"round {result.rounds}, kill {n} ({landing.phase}): {p}" for p in landing.problems]
            if read_status(run_dir).get("status") == "completed":  # a signal as the run ended: it still completed
                break
        cache = work / case.name / "round-1" / "cache"
        compared = _compare(reference, run_dir, work / case.name / "golden-cache", cache, result)
        rewritten = [task for task, data in kept.items() if _bytes(run_dir / "downstream" / f"{task}.json") != data]
        compared += [f"round {result.rounds}: the record of {t}, kept by a killed scoring, changed" for t in rewritten]
        result.problems += compared
        verdict = "; ".join(compared) or "identical to the uninterrupted run"
        console.print(f"{case.name} round {result.rounds}: {verdict}")
    return result


def _bytes(path: Path) -> bytes | None:
    return path.read_bytes() if path.exists() else None


def _scoring_kill_problems(run_dir: Path, kept: dict[str, bytes]) -> list[str]:
    """A kill during the scoring must leave status.json saying the run is unfinished (scoring, or preempted in
    phase scoring) and every task the scoring's ledger (RUN/scoring.json) names whole on disk; those records are
    remembered in `kept`, to be found untouched when the round ends."""
    status = read_status(run_dir)
    if status.get("status") == "completed":
        return []
    problems = []
    if status.get("status") not in (SCORING, "preempted") or status.get("phase") != SCORING:
        problems.append(f"killed while scoring, status.json says {status.get('status')!r}, not scoring")
    ledger = _json(run_dir / "scoring.json")
    recorded = [t for t in ledger.get("recorded", []) if isinstance(t, str)]
    problems += record_problems(run_dir, recorded)
    for task in recorded:
        kept.setdefault(task, _bytes(run_dir / "downstream" / f"{task}.json") or b"")
    return problems


def _json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


VOLATILE = ("examples_per_s", "seconds", "shared", "entry_digest", "key")
"""Record keys that say how long a scoring took, whether its control was read back from the cache, or which cache
entry it is (a digest of lmpt's source too, which changes under a checkout being edited), not what it scored: left
out of the comparison with the golden run."""


def _scored(run_dir: Path) -> dict:
    """Task -> its record (without VOLATILE keys, the run directory's path as RUN), and the logged figures."""

    def strip(value: object) -> object:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in VOLATILE}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value.replace(str(run_dir), "RUN") if isinstance(value, str) else value

    records = {p.stem: strip(_json(p)) for p in sorted((run_dir / "downstream").glob("*.json"))}
    lines = (run_dir / "metrics.jsonl").read_text().splitlines() if (run_dir / "metrics.jsonl").exists() else []
    logged = [r for r in map(json.loads, lines) if any(k.startswith("downstream/") for k in r)]
    return {"records": records, "logged": logged}


def _compare(reference: Path, run_dir: Path, reference_cache: Path, cache: Path, result: CaseResult) -> list[str]:
    if not (run_dir / "model.safetensors").exists() or read_status(run_dir).get("status") != "completed":
        return [f"round {result.rounds} never finished"]
    problems = []
    try:
        assert_same(reference, run_dir, f"round {result.rounds}")
    except AssertionError as exc:
        problems.append(str(exc))
    if cache_files(cache) != cache_files(reference_cache):
        problems.append(f"round {result.rounds}: the token cache built under kills differs from a clean build")
    golden_scored, scored = _scored(reference), _scored(run_dir)
    if scored["records"] != golden_scored["records"]:
        problems.append(f"round {result.rounds}: the downstream records differ from the uninterrupted run's")
    if scored["logged"] != golden_scored["logged"] or len(scored["logged"]) != 1:
        problems.append(f"round {result.rounds}: the logged downstream figures differ (or are logged more than once)")
    if (run_dir / "scoring.json").exists():
        problems.append(f"round {result.rounds}: the completed run kept its scoring ledger")
    result.same_sha256 &= _sha256(reference / "model.safetensors") == _sha256(run_dir / "model.safetensors")
    return problems
