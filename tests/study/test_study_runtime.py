"""lmpt-study at run time: trials fixed before they run (optuna's random draw, without optuna), resumed as themselves
after SIGTERM or kill -9, the study directory held by one study, --help showing the values run, only the plan's
tasks read and each record checked against its run's log, HYDRA_FULL_ERROR left as the user set it for the runs,
and lmpt-prepare stopped by SIGTERM in one line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from runner import lmpt_env, run_lmpt, run_process
from test_study import STUDY, run_study

from lmpt.downstream.significance import encode_outcomes
from lmpt.errors import LmptError
from lmpt.stopping import EXIT_PREEMPTED
from lmpt.study.gains import gain_verdicts, study_gains
from lmpt.study.plan import DEFAULT_SPACES, NO_SCORING, StudyPlan, no_scoring, record_recipes, recorded_recipes
from lmpt.study.pool import lock_holder
from lmpt.study.ranges import draw_recipes, read_range, read_space
from lmpt.study.record import refuse_another_study
from lmpt.study.runs import FinalRun, StudyRuns, read_final


def test_recipes_are_the_draws_of_optunas_random_sampler_as_the_sweeper_asked_it() -> None:
    """The recipes a study drew through hydra-optuna-sweeper (trials asked in batches, each key in the space's order)
    are the ones it draws now, without optuna: an uninterrupted default study keeps its recipes."""
    import optuna
    from optuna.distributions import CategoricalDistribution, LogUniformDistribution, UniformDistribution

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    space = {**DEFAULT_SPACES["muon"], "w": "interval(0.1, 0.3)", "x": "choice(1, 2, a)", "one": "interval(0.5, 0.5)"}
    dists = {
        "optimizer.lr": LogUniformDistribution(0.005, 0.2),
        "optimizer.adamw_lr": LogUniformDistribution(0.002, 0.1),
        "w": UniformDistribution(0.1, 0.3),
        "x": CategoricalDistribution([1, 2, "a"]),
        "one": UniformDistribution(0.5, 0.5),
    }
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=3))
    theirs = []
    for _ in range(3):  # the sweeper's batches of n_jobs=2
        trials = [study.ask() for _ in range(2)]
        for trial in trials:
            for name, distribution in dists.items():
                trial._suggest(name, distribution)
            theirs.append({name: str(value) for name, value in trial.params.items()})
    assert draw_recipes(read_space(space), 6, 3) == theirs
    # seen from an lmpt -m hydra/sweeper=optuna sweep of the default space at seed 0 (its job headers)
    assert draw_recipes(read_space(DEFAULT_SPACES["muon"]), 1, 0) == [
        {"optimizer.lr": "0.037861878865426045", "optimizer.adamw_lr": "0.03281823923403229"}
    ]


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("bogus", "is no search range"),
        ("range(1, 5)", "is no search range"),
        ("interval(0.2, 0.1)", "low end above"),
        ("tag(log, interval(0, 1))", "low end must be above 0"),
        ("tag(oops, interval(0.1, 1))", "is no search range"),
        ("interval(0.1", "cannot be read"),
    ],
)
def test_a_bad_range_is_one_line_naming_the_key(expression: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as caught:
        read_range("optimizer.lr", expression)
    assert str(caught.value).startswith("study.space: optimizer.lr=") and "\n" not in str(caught.value)


def test_help_shows_the_values_the_study_runs(tmp_path: Path) -> None:
    shown = run_lmpt("study.seeds=[4]", "--help", cwd=tmp_path, command="lmpt-study")
    assert shown.returncode == 0, shown.stderr
    for line in (
        "study.objectives=[clm,mlm,gpt-bert]",
        "study.trials=6",
        "study.budgets=[3e12flops,1e13flops]",
        "study.seeds=[4]",
        "study.sampler=random",
    ):
        assert f"  {line}\n" in shown.stdout, shown.stdout
    assert "[[]]" not in shown.stdout and not list(tmp_path.iterdir())


def test_the_task_and_its_child_processes_see_the_users_own_hydra_full_error(tmp_path: Path) -> None:
    """run_hydra_app sets HYDRA_FULL_ERROR=1 for Hydra only: a run the task launches (a study's) reports its own
    errors in one line, as it does alone."""
    script = (
        "import os, sys; sys.argv[1:] = ['hydra.run.dir=.', 'hydra.output_subdir=null']\n"
        "from lmpt.app import run_hydra_app\n"
        "run_hydra_app(lambda cfg: print('task sees', os.environ.get('HYDRA_FULL_ERROR')))\n"
    )
    seen = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=lmpt_env(), capture_output=True, text=True, timeout=120
    )
    assert seen.returncode == 0 and "task sees None" in seen.stdout, seen.stdout + seen.stderr


def _final(root: Path, logged: dict[str, float], record: dict, seed: int = 0) -> FinalRun:
    path = root / f"clm-seed{seed}"
    (path / "downstream").mkdir(parents=True)
    (path / "downstream" / "pairs.json").write_text(json.dumps(record))
    (path / "downstream" / "by-hand.json").write_text(json.dumps({"gain": {"accuracy": {"gain": 0.4}}}))
    (path / "metrics.jsonl").write_text(json.dumps({"step": 10, **logged}) + "\n")
    (path / "status.json").write_text(json.dumps({"status": "completed"}))
    return read_final(path, "clm", seed, "1e12flops", ["pairs"])


def _pairs(correct: np.ndarray, control: np.ndarray) -> dict:
    return {
        "accuracy": float(correct.mean()),
        "accuracy_items": encode_outcomes(correct),
        "scratch": {"accuracy": float(control.mean()), "accuracy_items": encode_outcomes(control)},
        "gain": {"accuracy": {"gain": float(correct.mean() - control.mean())}},
    }


def test_a_study_reads_only_its_own_tasks_and_leaves_out_a_record_its_log_contradicts(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    correct, control = rng.random(200) < 0.6, rng.random(200) < 0.5
    logged = {
        "downstream/pairs/accuracy": float(correct.mean()),
        "downstream/pairs/scratch_accuracy": float(control.mean()),
        "downstream/by-hand/accuracy": 0.9,
    }
    honest = _final(tmp_path / "a", logged, _pairs(correct, control))
    assert list(honest.tasks) == ["pairs"] and not any("by-hand" in k for k in honest.downstream)
    table = study_gains(["1e12flops"], ["clm"], {"clm": [honest]})
    assert {(r.objective, r.task) for r in table.rows} == {("clm", "pairs")} and not table.flagged
    forged = _final(tmp_path / "b", logged, _pairs(np.ones(200, bool), np.zeros(200, bool)))  # outcomes replaced
    table = study_gains(["1e12flops"], ["clm"], {"clm": [forged]})
    assert "1e12flops" not in table.budgets() and len(table.flagged) == 1
    sentence = gain_verdicts(table)["mismatch/0"]
    assert "pairs.json does not match its run's log (accuracy 1.0000 where metrics.jsonl logged" in sentence


def test_a_study_of_the_earlier_sweep_layout_is_refused_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "study" / "search" / "clm" / "launch-0" / "0").mkdir(parents=True)
    result = run_study(*STUDY, cwd=tmp_path)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "made by an earlier lmpt-study, whose searches ran as optuna sweeps" in result.stderr


def test_a_study_directory_held_by_another_study_is_refused_in_one_line(tmp_path: Path) -> None:
    from lmpt.rundir.directory import lock_run_dir, release_run_dirs

    (tmp_path / "study").mkdir()
    lock_run_dir(tmp_path / "study")  # this process stands for a study running there
    try:
        result = run_process(*STUDY, cwd=tmp_path, command="lmpt-study")  # another process, as another study is
    finally:
        release_run_dirs()
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert f"is in use by another lmpt-study (PID {os.getpid()})" in result.stderr
    assert sorted(p.name for p in (tmp_path / "study").iterdir()) == [".lock"]


def _catches_sigterm(pid: int) -> bool:
    """Whether the process has installed its SIGTERM handler yet (Linux: /proc/PID/status SigCgt)."""
    status = Path(f"/proc/{pid}/status").read_text()
    caught = int(next(line for line in status.splitlines() if line.startswith("SigCgt:")).split()[1], 16)
    return bool(caught & (1 << (signal.SIGTERM - 1)))


def _wait_for(condition, timeout: float = 240.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def _start_study(args: list[str], cwd: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "lmpt.study", *args],
        cwd=cwd,
        env=lmpt_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.soak  # ~90 s: three launches of a one-objective study, two of them stopped mid-trial
def test_a_trial_stopped_by_sigterm_or_kill_9_resumes_as_itself_and_leaves_no_run_behind(tmp_path: Path) -> None:
    # trials of ~140 steps (a few seconds each): long enough to be stopped while they train
    args = [*STUDY[:-1], "trainer.budget=4e10flops", "study.objectives=[clm]", "study.dir=s", "trainer.ckpt_every=20"]
    trial = tmp_path / "s" / "search" / "clm" / "trial-1"

    first = _start_study(args, tmp_path)  # SIGTERM during the second trial: it saves a checkpoint, then one line
    _wait_for(lambda: (trial / "metrics.jsonl").exists() and lock_holder(trial) is not None)  # it is training
    first.send_signal(signal.SIGTERM)
    _, stderr = first.communicate(timeout=240)
    assert first.returncode == 75 and stderr.strip().splitlines()[-1].startswith(
        "lmpt-study: stopped by SIGTERM; run the same command to resume the study"
    ), stderr
    assert lock_holder(trial) is None and json.loads((trial / "status.json").read_text())["status"] == "preempted"

    second = _start_study(args, tmp_path)  # kill -9 while the same trial continues: its run stops with the study
    _wait_for(lambda: lock_holder(trial) is not None)
    second.kill()
    second.wait()

    third = _start_study(args, tmp_path)  # at once: the left run is stopped (or already gone), never trained beside
    _, stderr = third.communicate(timeout=400)
    assert third.returncode == 0, stderr[-3000:]
    record = json.loads((tmp_path / "s" / "study.json").read_text())
    trials = record["objectives"]["clm"]["search"]["trials"]
    assert [t["recipe"] for t in trials] == record["plan"]["search_recipes"]  # the same recipes, drawn up front
    assert [t["status"] for t in trials] == ["completed", "completed"]
    assert sorted(p.name for p in trial.parent.iterdir()) == ["trial-0", "trial-1"]
    steps = [json.loads(line)["step"] for line in (trial / "metrics.jsonl").read_text().splitlines()]
    assert steps == sorted(steps)  # one run, continued: no step trained twice into its log


def test_lmpt_prepare_stopped_by_sigterm_says_so_in_one_line(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    words = np.array([f"w{i}" for i in range(3000)])
    (tmp_path / "text.txt").write_text("\n".join(" ".join(rng.choice(words, 60)) for _ in range(30000)))
    command = [
        sys.executable,
        "-m",
        "lmpt.prepare",
        "data=text",
        "data.paths=[text.txt]",
        "tokenizer.vocab_size=2000",
        f"data.cache_dir={tmp_path / 'cache'}",
    ]
    process = subprocess.Popen(
        command,
        cwd=tmp_path,
        env=lmpt_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=os.setpgrp,
    )
    _wait_for(lambda: _catches_sigterm(process.pid), timeout=120)
    os.kill(process.pid, signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == EXIT_PREEMPTED, stderr
    assert stderr.strip().splitlines() == [
        "lmpt-prepare: stopped by SIGTERM; run the same command to resume (what it finished is kept)"
    ]


def _plan(directory: Path, recipes: list[dict[str, str]]) -> StudyPlan:
    space = {"optimizer.lr": "tag(log, interval(0.0001, 0.1))"}
    return StudyPlan(
        ["clm"],
        [0],
        directory,
        [],
        ["1e12flops"],
        "2.5e11flops",
        {"clm": 40},
        "last",
        space,
        2,
        "random",
        7,
        recipes,
        [],
    )


def test_the_plan_writes_its_recipes_and_a_resume_reads_them_back_whatever_the_draw(tmp_path: Path) -> None:
    """Issue 52: the recipes are the study's own record, so the draw is an implementation detail. A study's folder
    holds them from its first launch (STUDY/recipes.json); a later launch reads them, not the draw; a study begun
    before that file reads them from its study.json's plan."""
    space, drawn = {"optimizer.lr": "tag(log, interval(0.0001, 0.1))"}, [{"optimizer.lr": "0.5"}, {"optimizer.lr": "1"}]
    assert recorded_recipes(tmp_path, space, 2, 7) is None  # a new study draws
    record_recipes(_plan(tmp_path, drawn))
    assert json.loads((tmp_path / "recipes.json").read_text()) == {
        "search_space": space,
        "trials_per_objective": 2,
        "search_seed": 7,
        "search_recipes": drawn,
    }
    assert recorded_recipes(tmp_path, space, 2, 7) == drawn  # not what the draw gives from seed 7
    assert draw_recipes(read_space(space), 2, 7) != drawn
    record_recipes(_plan(tmp_path, [{"optimizer.lr": "0.1"}] * 2))  # written once: a later launch keeps them
    assert recorded_recipes(tmp_path, space, 2, 7) == drawn
    assert recorded_recipes(tmp_path, space, 3, 7) is None and recorded_recipes(tmp_path, space, 2, 8) is None

    older = tmp_path / "older"  # a study of the earlier lmpt: its recipes are in study.json's plan alone
    older.mkdir()
    plan = {"search_space": space, "trials_per_objective": 2, "search_seed": 7, "search_recipes": drawn}
    (older / "study.json").write_text(json.dumps({"plan": {"objectives": ["clm"], **plan}}))
    assert recorded_recipes(older, space, 2, 7) == drawn
    (older / "study.json").write_text(json.dumps({"plan": {**plan, "search_recipes": [{"optimizer.lr": 3}] * 2}}))
    assert recorded_recipes(older, space, 2, 7) is None  # recipes that do not read as such are not taken


def test_a_folder_whose_recipes_are_of_another_search_is_refused(tmp_path: Path) -> None:
    record_recipes(_plan(tmp_path, [{"optimizer.lr": "0.5"}, {"optimizer.lr": "1"}]))
    refuse_another_study(_plan(tmp_path, [{"optimizer.lr": "0.5"}, {"optimizer.lr": "1"}]))  # its own: resumed
    with pytest.raises(LmptError, match=r"holds another study \(search_recipes differ from this command's\)"):
        refuse_another_study(_plan(tmp_path, [{"optimizer.lr": "0.5"}, {"optimizer.lr": "2"}]))


def test_a_trial_turns_downstream_tasks_off_only_where_the_study_names_them() -> None:
    """A search trial scores nothing; `downstream.tasks=[]` joins its run keys only for a study whose run keys name
    downstream.tasks, so a trial of a study begun before that key is launched with the run keys it had."""
    assert no_scoring(["data=wikitext", "downstream.choice_tasks=[bundled:blimp-fast]"]) == NO_SCORING
    assert "downstream.tasks=[]" not in NO_SCORING
    named = no_scoring(["data=wikitext", "downstream.tasks=[bundled:blimp-fast]"])
    assert named == (*NO_SCORING, "downstream.tasks=[]")


class _RefusingPool:
    """A pool with a free slot that refuses every run it is asked to start."""

    running: list = []
    free = True
    side_by_side = False

    def start(self, launch) -> str:
        raise LmptError(f"{launch.name}: no slot would take it")


def test_a_launch_refused_before_it_collected_anything_leaves_the_record_as_it_was(tmp_path: Path) -> None:
    """A study resumed and refused at its first trial (a run that will not start) reports the refusal and keeps its
    study.md: the record on disk holds more than that launch collected."""
    (tmp_path / "study.md").write_text("# the study as it stood\n")
    written: list[tuple] = []
    runs = StudyRuns(_plan(tmp_path, [{"optimizer.lr": "0.001"}] * 2), _RefusingPool(), lambda *r: written.append(r))
    with pytest.raises(LmptError, match="no slot would take it"):
        runs.run()
    runs.write()  # as lmpt-study does after a failure
    assert written == [] and (tmp_path / "study.md").read_text() == "# the study as it stood\n"
