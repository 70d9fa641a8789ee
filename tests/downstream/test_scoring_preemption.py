"""A stop signal while the downstream tasks are scored after training (issue 32): the scoring stops at once,
status.json says preempted in phase scoring, the resume line is printed and the exit code is 75; the printed command
trains nothing, keeps the tasks recorded, scores the rest and completes the run with each figure logged once."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
from pathlib import Path

import pytest
from runner import SMALL, TINY_MODEL, lmpt_command, lmpt_env, records, run_lmpt

from lmpt.config.schema import DownstreamConfig
from lmpt.downstream import run_tasks
from lmpt.downstream.bundled import tasks_dir
from lmpt.downstream.records import LEDGER, SCORING, ScoringProgress, recorded_before, stoppable_scoring
from lmpt.report.runs import find_runs
from lmpt.stopping import EXIT_PREEMPTED
from lmpt.train.run import TrainResult

TINY = [
    *SMALL,
    "trainer.max_steps=4",
    "trainer.sample_tokens=0",
    "trainer.eval_batches=1",
    *TINY_MODEL,
]


def _cloze(root: Path) -> Path:
    """A short multiple-choice task, scored in a moment."""
    task = root / "cloze.jsonl"
    task.write_text("".join((tasks_dir() / "shakespeare-cloze.jsonl").read_text().splitlines(keepends=True)[:40]))
    return task


def _figure_records(run: Path) -> list[dict]:
    return [r for r in records(run) if any(k.startswith("downstream/") for k in r)]


@pytest.mark.soak  # ~35 s: two launches and 2,010 minimal pairs scored one at a time
def test_sigterm_while_scoring_exits_for_requeue_and_the_resume_scores_without_training(tmp_path: Path) -> None:
    run = tmp_path / "run"
    slow = "bundled:blimp-fast"  # downstream.batch_size=1: a few seconds of scoring, the time the signal needs
    args = [*TINY, f"downstream.choice_tasks=[{_cloze(tmp_path)},{slow}]", "downstream.batch_size=1"]
    process = subprocess.Popen(
        lmpt_command(*args, f"hydra.run.dir={run}"),
        cwd=tmp_path,
        env=lmpt_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    for line in process.stdout:  # the first task is recorded, the second is being scored
        if line.startswith("scoring blimp-fast"):
            break
    model = (run / "model.safetensors").read_bytes()
    process.send_signal(signal.SIGTERM)
    rest, err = process.communicate(timeout=120)

    assert process.returncode == EXIT_PREEMPTED, err
    assert "SIGTERM: stopping the downstream scoring, then exiting" in rest
    resume_line = f"to resume: lmpt trainer.resume={run} (exit code 75)"
    assert resume_line in rest.splitlines()
    status = json.loads((run / "status.json").read_text())
    assert (status["status"], status["phase"], status["step"]) == ("preempted", SCORING, 4)
    assert status["recorded"] == ["cloze"]
    assert _figure_records(run) == [] and not (run / "downstream" / "blimp-fast.json").exists()
    (listed,) = find_runs([run])  # what lmpt-compare lists
    assert listed.status == "preempted" and listed.downstream == {}

    command = shlex.split(resume_line.removeprefix("to resume: ").removesuffix(" (exit code 75)"))
    assert command[0] == "lmpt"
    done = run_lmpt(*command[1:], cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "cloze: kept as scored before the stop" in done.stdout and "scoring blimp-fast" in done.stdout
    assert "scoring cloze" not in done.stdout
    assert json.loads((run / "status.json").read_text())["status"] == "completed"
    assert (run / "model.safetensors").read_bytes() == model  # trained no further
    assert max(r["step"] for r in records(run)) == 4
    (figures,) = _figure_records(run)  # every task's figures, once
    assert {"downstream/cloze/accuracy", "downstream/blimp-fast/accuracy"} <= set(figures)
    (listed,) = find_runs([run])
    assert listed.status == "completed" and "downstream/blimp-fast/accuracy" in listed.downstream


def _result(run: Path, step: int = 4) -> TrainResult:
    return TrainResult("completed", run, step, 1.5, 2.0, "cpu", train_s=3.25)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGUSR1])
def test_a_stop_signal_ends_scoring_at_once_with_the_tasks_recorded(
    tmp_path: Path, capsys: pytest.CaptureFixture, sig: signal.Signals
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    reached = []
    with pytest.raises(SystemExit) as stopped, stoppable_scoring(_result(run), world_size=1) as progress:
        progress.write_record(run, "cloze", {"task": "cloze", "accuracy": 0.5})
        os.kill(os.getpid(), sig)  # the handler raises before the next line runs
        reached.append("after the signal")
    assert stopped.value.code == EXIT_PREEMPTED and reached == []
    out = capsys.readouterr().out
    assert f"{sig.name}: stopping the downstream scoring, then exiting" in out
    assert f"to resume: lmpt trainer.resume={run} (exit code 75)" in out
    status = json.loads((run / "status.json").read_text())
    assert status == {
        "status": "preempted",
        "step": 4,
        "wall_s": 1.5,
        "phase": SCORING,
        "train_s": 3.25,
        "recorded": ["cloze"],
    }
    assert recorded_before(run, 4) == {"cloze"}
    assert recorded_before(run, 8) == frozenset()  # trained on since: the record is of older weights
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the handlers are given back


def test_a_stop_a_library_turns_into_another_error_still_ends_scoring_for_requeue(tmp_path: Path) -> None:
    """The signal can land inside a library whose cleanup raises an error of its own in place of the handler's
    exception (OmegaConf's does): the scoring still ends as stopped, preempted and 75, not with a traceback."""
    run = tmp_path / "run"
    run.mkdir()
    with pytest.raises(SystemExit) as stopped, stoppable_scoring(_result(run), world_size=1):
        try:
            os.kill(os.getpid(), signal.SIGTERM)
        finally:
            raise AttributeError("'NoneType' object has no attribute '_invalidate_flags_cache'")
    assert stopped.value.code == EXIT_PREEMPTED
    assert json.loads((run / "status.json").read_text())["status"] == "preempted"


def test_a_resumed_scoring_keeps_the_recorded_tasks_and_logs_each_figure_once(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "downstream").mkdir(parents=True)
    task = _cloze(tmp_path)
    kept = {"task": "cloze", "accuracy": 0.25, "accuracy_norm": 0.5, "chance": 0.25}
    (run / "downstream" / "cloze.json").write_text(json.dumps(kept))
    stale = {"step": 4, "downstream/cloze/accuracy": 0.75}  # logged by a scoring stopped after its last write
    (run / "metrics.jsonl").write_text(json.dumps({"step": 4, "val_loss": 2.0}) + "\n" + json.dumps(stale) + "\n")
    downstream = DownstreamConfig(choice_tasks=[str(task)], classification_tasks=[], batch_size=8, weights="last")
    progress = ScoringProgress(kept=frozenset({"cloze"}))

    figures = run_tasks.score_downstream(downstream, run, 4, "cpu", progress)  # no model: nothing is scored

    assert figures == {
        "downstream/cloze/accuracy": 0.25,
        "downstream/cloze/accuracy_norm": 0.5,
        "downstream/cloze/chance": 0.25,
    }
    assert records(run) == [{"step": 4, "val_loss": 2.0}, {"step": 4, **figures}]
    assert progress.recorded == ["cloze"]


def test_a_record_cut_short_or_not_kept_is_scored_again(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "downstream").mkdir(parents=True)
    (run / "downstream" / "cloze.json").write_text('{"task": "cloze", "accur')  # cut short
    progress = ScoringProgress(kept=frozenset({"cloze"}))
    assert progress.kept_record(run, "cloze") is None and progress.recorded == []
    assert ScoringProgress().kept_record(run, "cloze") is None  # not stopped while scoring: nothing is kept


def test_a_scoring_cut_off_without_a_word_reads_unfinished_and_resumes_with_its_tasks_and_seconds(
    tmp_path: Path,
) -> None:
    """kill -9 runs no Python: what a killed scoring leaves is what it wrote as it went. status.json says scoring
    before the first task (lmpt-compare lists the run as incomplete, never completed without its figures); the
    ledger names each task recorded and the seconds spent; the next launch keeps those tasks and counts those
    seconds in downstream_s; a completed scoring removes the ledger."""
    run = tmp_path / "run"
    run.mkdir()
    with pytest.raises(RuntimeError), stoppable_scoring(_result(run), world_size=1) as progress:
        status = json.loads((run / "status.json").read_text())
        assert (status["status"], status["phase"], status["step"], status["recorded"]) == ("scoring", SCORING, 4, [])
        progress.write_record(run, "cloze", {"task": "cloze", "accuracy": 0.5})
        raise RuntimeError("the process is gone here")  # the body never ends: as after kill -9
    (listed,) = find_runs([run])
    assert listed.status == "incomplete"
    ledger = json.loads((run / LEDGER).read_text())
    assert (ledger["step"], ledger["recorded"]) == (4, ["cloze"]) and ledger["seconds"] >= 0
    record = (run / "downstream" / "cloze.json").read_bytes()

    ledger["seconds"] = 7.5  # an earlier launch's scoring time, made large enough to see
    (run / LEDGER).write_text(json.dumps(ledger))
    assert recorded_before(run, 4) == {"cloze"} and recorded_before(run, 8) == frozenset()
    with stoppable_scoring(_result(run), world_size=1) as progress:
        assert progress.kept == {"cloze"} and progress.earlier_s == 7.5
        status = json.loads((run / "status.json").read_text())
        assert (status["status"], status["recorded"], status["downstream_s"]) == ("scoring", ["cloze"], 7.5)
        assert progress.kept_record(run, "cloze") == {"task": "cloze", "accuracy": 0.5}
        seconds = progress.seconds()
    assert seconds >= 7.5 and not (run / LEDGER).exists()
    assert (run / "downstream" / "cloze.json").read_bytes() == record


@pytest.mark.soak  # ~40 s: three launches, 2,010 minimal pairs scored one at a time
def test_kill_9_while_scoring_keeps_the_recorded_tasks_and_the_same_command_finishes_the_run(tmp_path: Path) -> None:
    run = tmp_path / "run"
    slow = "bundled:blimp-fast"
    args = [
        *TINY,
        f"downstream.choice_tasks=[{_cloze(tmp_path)},{slow}]",
        "downstream.batch_size=1",
        f"hydra.run.dir={run}",
    ]
    process = subprocess.Popen(
        lmpt_command(*args), cwd=tmp_path, env=lmpt_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    for line in process.stdout:
        if line.startswith("scoring blimp-fast"):
            break
    process.kill()
    process.communicate(timeout=60)
    status = json.loads((run / "status.json").read_text())
    assert (status["status"], status["step"]) == ("scoring", 4)
    (listed,) = find_runs([run])
    assert listed.status == "incomplete" and listed.downstream == {}
    cloze = (run / "downstream" / "cloze.json").read_bytes()
    before = json.loads((run / LEDGER).read_text())
    assert before["recorded"] == ["cloze"]

    done = run_lmpt(*args, cwd=tmp_path)  # the same command
    assert done.returncode == 0, done.stderr[-3000:]
    assert "cloze: kept as scored before the stop" in done.stdout and "scoring cloze" not in done.stdout
    assert (run / "downstream" / "cloze.json").read_bytes() == cloze  # kept, not scored again
    status = json.loads((run / "status.json").read_text())
    assert status["status"] == "completed" and status["downstream_s"] >= before["seconds"]
    assert not (run / LEDGER).exists()
    (figures,) = _figure_records(run)
    assert {"downstream/cloze/accuracy", "downstream/blimp-fast/accuracy"} <= set(figures)
