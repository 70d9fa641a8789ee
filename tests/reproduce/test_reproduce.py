"""lmpt-reproduce: the plan and its time without writing anything, bad input in one line, a grid of real lmpt runs
that resumes after a kill (completed runs kept, a stopped one continued from its checkpoint), and the document with
the README's table rebuilt from it."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from typing import ClassVar

import pytest
from runner import TINY_RUN, lmpt_env, records, wait_for_step

from lmpt.config.command_options import run_command
from lmpt.errors import LmptError
from lmpt.reproduce import grid
from lmpt.reproduce.cli import reproduce
from lmpt.reproduce.document import END, START, update_readme, write_document
from lmpt.reproduce.fim import FimForFree
from lmpt.reproduce.reproduction import Findings, FinishedRun, PlannedRun, Reproduction, read_finished

STEPS = 30


class Toy(Reproduction):
    """Two tiny runs that differ in their seed (defined here, found by the registry as lmpt's own are)."""

    name: ClassVar[str] = "toy-for-tests"
    title: ClassVar[str] = "a toy"
    paper: ClassVar[str] = 'Nobody (2026), "A toy", nowhere'
    claim: ClassVar[str] = "Section 1: two seeds agree"
    papers_figures: ClassVar[str] = "none"

    def runs(self) -> list[PlannedRun]:
        keys = (
            *TINY_RUN,
            f"trainer.max_steps={STEPS}",
            "trainer.log_every=1",
            "trainer.eval_every=0",
            "trainer.ckpt_every=5",
        )
        return [PlannedRun(f"seed{s}", (*keys, f"trainer.seed={s}"), {"seed": s, "model": "tiny"}, 1e9) for s in (0, 1)]

    def analyse(self, finished: list[FinishedRun]) -> Findings:
        losses = [run.last("val_loss") for run in finished]
        return Findings(f"Reproduced: {len(finished)} runs", f"{len(finished)} runs", [("Runs", f"losses {losses}")])


def refused(argv: list[str], capsys, monkeypatch) -> str:
    monkeypatch.setattr(sys, "argv", ["lmpt-reproduce", *argv])
    with pytest.raises(SystemExit) as stopped:
        run_command(reproduce)
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and err.startswith("lmpt: error: ") and err.count("\n") == 1, err
    return err


def test_the_dry_run_shows_every_run_and_the_time_and_writes_nothing(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    reproduce(["fim", "dry_run=true", "slots=1"])
    out = capsys.readouterr().out
    assert "24 runs" in out and "tiny-300steps-fim-seed2" in out and "objective.fim_rate=0.0" in out
    assert "about" in out and list(tmp_path.iterdir()) == []
    plan = grid.plan_grid(FimForFree(3), tmp_path / "x", "1", 1e9)
    assert plan.estimate_s == pytest.approx(2 * grid.plan_grid(FimForFree(3), tmp_path / "x", "2", 1e9).estimate_s)


def test_bad_input_is_one_line_and_writes_nothing(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert "no reproduction called 'nope': choose one of" in refused(["nope"], capsys, monkeypatch)
    assert "more than max_minutes=1" in refused(["fim", "max_minutes=1"], capsys, monkeypatch)
    assert "seeds=0 must be at least 1" in refused(["fim", "seeds=0"], capsys, monkeypatch)
    assert "max_minutes=nan must be a number of minutes above 0" in refused(
        ["fim", "max_minutes=nan"], capsys, monkeypatch
    )
    assert "max_minutes=0 must be" in refused(["fim", "max_minutes=0"], capsys, monkeypatch)
    assert "unknown key 'seed'" in refused(["fim", "seed=3"], capsys, monkeypatch)
    assert "study.slots=99" in refused(["fim", "slots=99"], capsys, monkeypatch)
    assert list(tmp_path.iterdir()) == []


def test_a_killed_grid_resumes_completed_runs_kept_and_a_stopped_one_continued(tmp_path, capsys) -> None:
    toy = Toy(1)
    folder = tmp_path / "grid"
    first, second = toy.runs()
    # the first run completes; the second is stopped by SIGTERM mid-way (a checkpoint committed), as a kill leaves it
    done = subprocess.run(
        grid.launch_command(folder, first), env=lmpt_env(), capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    kept = (folder / first.name / "status.json").stat().st_mtime_ns
    stopped = subprocess.Popen(grid.launch_command(folder, second), env=lmpt_env(), stdout=subprocess.DEVNULL)
    wait_for_step(folder / second.name, 12)
    stopped.send_signal(signal.SIGTERM)
    assert stopped.wait(timeout=120) == 75
    steps_before = max(r["step"] for r in records(folder / second.name))
    assert steps_before < STEPS

    plan = grid.plan_grid(toy, folder, "1", 60)
    assert plan.done == [first.name]
    grid.run_grid(toy, plan)
    assert (folder / first.name / "status.json").stat().st_mtime_ns == kept  # not trained again
    log = records(folder / second.name)
    assert max(r["step"] for r in log) == STEPS and "resuming" in (folder / second.name / "lmpt.log").read_text()
    assert [r.planned.name for r in read_finished(folder, toy.runs())] == ["seed0", "seed1"]
    assert json.loads((folder / grid.TIME_FILE).read_text())["launches"] == 1

    # a grid whose runs were launched with other keys is refused before anything starts
    class Other(Toy):
        name: ClassVar[str] = "toy-other-keys"

        def runs(self) -> list[PlannedRun]:
            return [PlannedRun(r.name, (*r.keys, "optimizer.lr=0.01"), r.labels, r.flops) for r in super().runs()]

    with pytest.raises(LmptError, match="launched with other run keys"):
        grid.plan_grid(Other(1), folder, "1", 60)

    # the document, its summary, and the README's table rebuilt from it
    out = tmp_path / "docs" / "reproductions"
    path = write_document(toy, toy.analyse(read_finished(folder, toy.runs())), out, 12.0, 34.0)
    text = path.read_text()
    assert "**Verdict: Reproduced: 2 runs**" in text and "`lmpt-reproduce toy-for-tests seeds=1`" in text
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n{START}\nold\n{END}\n\nafter\n")
    assert update_readme(readme, out)
    table = readme.read_text()
    assert "old" not in table and "[Reproduced](docs/reproductions/toy-for-tests.md)" in table and "after" in table


def test_a_console_reproduction_stopped_by_sigterm_says_how_to_resume(tmp_path) -> None:
    child = subprocess.Popen(
        [sys.executable, "-m", "lmpt.reproduce", "fim", "seeds=1", "slots=1", f"dir={tmp_path / 'g'}"],
        cwd=tmp_path,
        env=lmpt_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for_step(tmp_path / "g" / "tiny-100steps-clm-seed0", 1, timeout=120)
    child.send_signal(signal.SIGTERM)
    out, err = child.communicate(timeout=120)
    assert child.returncode == 75 and "run the same command to resume" in err, err
    assert not (tmp_path / "docs").exists()
