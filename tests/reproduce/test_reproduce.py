"""lmpt-reproduce: the plan and its time without writing anything, bad input in one line, a grid of real lmpt runs
that resumes after a kill (completed runs kept, a stopped one continued from its checkpoint), and the document with
the README's table rebuilt from it."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import ClassVar

import pytest
from runner import TINY_RUN, lmpt_env, records, wait_for_step

from lmpt.config.command_options import run_command
from lmpt.errors import LmptError
from lmpt.reproduce import grid
from lmpt.reproduce.cli import reproduce
from lmpt.reproduce.document import END, START, update_readme, write_document
from lmpt.reproduce.reproduction import Findings, FinishedRun, PlannedRun, Reproduction, Scale, read_finished
from lmpt.reproduce.verdict import Condition, Evidence, judge

STEPS = 30


class Toy(Reproduction):
    """Two tiny runs that differ in their seed (defined here, found by the registry as lmpt's own are)."""

    name: ClassVar[str] = "toy-for-tests"
    title: ClassVar[str] = "a toy"
    paper: ClassVar[str] = 'Nobody (2026), "A toy", nowhere'
    claim: ClassVar[str] = "Section 1: two seeds agree"
    papers_figures: ClassVar[str] = "none"
    scales: ClassVar[dict[Scale, dict]] = {Scale.laptop: {"seeds": 2}, Scale.paper: {"seeds": 2}}

    def runs(self) -> list[PlannedRun]:
        keys = (
            *TINY_RUN,
            f"trainer.max_steps={STEPS}",
            "trainer.log_every=1",
            "trainer.eval_every=0",
            "trainer.ckpt_every=5",
        )
        runs = [(f"seed{s}", (*keys, f"trainer.seed={s}"), {"seed": s, "model": "tiny"}) for s in range(self.seeds)]
        return [PlannedRun(*run, 1e9, 6e8) for run in runs]

    def analyse(self, finished: list[FinishedRun]) -> Findings:
        losses = [run.last("val_loss") for run in finished]
        conditions = [Condition("parameters", "7M", "0.1M", False)]
        evidence = Evidence.shows if len(finished) == self.seeds else Evidence.missing
        claims = [judge("two seeds agree", evidence, f"{len(finished)} runs", conditions)]
        return Findings(claims, conditions, f"{len(finished)} runs", [("Every run", f"losses {losses}")])


def refused(argv: list[str], capsys, monkeypatch) -> str:
    monkeypatch.setattr(sys, "argv", ["lmpt-reproduce", *argv])
    with pytest.raises(SystemExit) as stopped:
        run_command(reproduce)
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and err.startswith("lmpt: error: ") and err.count("\n") == 1, err
    return err


def test_the_dry_run_shows_every_run_both_flop_counts_and_the_time_and_writes_nothing(
    tmp_path, capsys, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    reproduce([Toy.name, "dry_run=true", "slots=1", "seeds=3"])
    out = capsys.readouterr().out
    assert "scale=laptop: 3 runs" in out and "seed2" in out and "trainer.max_steps=30" in out
    assert "3e+09 FLOPs as lmpt counts them, 1.8e+09 in the paper's 6ND" in out and "GPU-hours" in out
    assert list(tmp_path.iterdir()) == []
    plan = grid.plan_grid(Toy(seeds=3), tmp_path / "x", "1", 1e9)
    assert plan.estimate_s == pytest.approx(2 * grid.plan_grid(Toy(seeds=3), tmp_path / "x", "2", 1e9).estimate_s)


def test_a_paper_scale_grid_is_planned_anywhere_and_run_only_where_a_gpu_or_slurm_is(
    tmp_path, capsys, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LMPT_STUDY_GPUS", "")
    reproduce([Toy.name, "scale=paper", "dry_run=true", "slots=1"])
    assert "scale=paper: 2 runs" in capsys.readouterr().out
    err = refused([Toy.name, "scale=paper", "slots=1"], capsys, monkeypatch)
    assert "scale=paper trains models of the paper's size: run it where a GPU is" in err
    assert list(tmp_path.iterdir()) == []


def test_keys_are_printed_as_written() -> None:
    """rich markup never swallows a key's value (`[bundled:zorro-fast]` once vanished from a plan)."""
    from rich.console import Console

    class Bracketed(Toy):
        name: ClassVar[str] = "toy-bracketed"

        def runs(self) -> list[PlannedRun]:
            return [PlannedRun("r", ("downstream.tasks=[bundled:zorro-fast]",), {"model": "tiny"}, 1.0)]

    import lmpt.console

    recorder = Console(record=True, width=400)
    original = lmpt.console.console
    lmpt.console.console = recorder
    try:
        grid.print_plan(Bracketed(), grid.GridPlan(Path("x"), Bracketed().runs(), [], [grid.Slot("serial")]))
    finally:
        lmpt.console.console = original
    assert "downstream.tasks=[bundled:zorro-fast]" in recorder.export_text()


def test_bad_input_is_one_line_and_writes_nothing(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert "no reproduction called 'nope': choose one of" in refused(["nope"], capsys, monkeypatch)
    assert "seeds=0 must be at least 1" in refused([Toy.name, "seeds=0"], capsys, monkeypatch)
    assert "seeds=99999999999999999999 is more than 100" in refused(
        [Toy.name, "seeds=99999999999999999999"], capsys, monkeypatch
    )
    assert "max_minutes=nan must be a number of minutes above 0" in refused(
        [Toy.name, "max_minutes=nan"], capsys, monkeypatch
    )
    assert "max_minutes=0 must be" in refused([Toy.name, "max_minutes=0"], capsys, monkeypatch)
    assert "unknown key 'seed'" in refused([Toy.name, "seed=3"], capsys, monkeypatch)
    assert "slots=99 asks for more slots" in refused([Toy.name, "slots=99"], capsys, monkeypatch)
    assert "scale=huge is unknown: use laptop or paper" in refused([Toy.name, "scale=huge"], capsys, monkeypatch)
    assert f"{Toy.name} takes no ladder= key: its grid is fixed" in refused(
        [Toy.name, "ladder=[16]"], capsys, monkeypatch
    )
    assert "device=tpu must be cpu or gpu" in refused([Toy.name, "device=tpu"], capsys, monkeypatch)
    (tmp_path / "file").write_text("x")
    assert "out=file is not a folder" in refused([Toy.name, "out=file"], capsys, monkeypatch)
    # /proc takes no new file, even from root (for whom os.access says it may write there)
    assert "out=/proc/lmpt-docs cannot be written" in refused([Toy.name, "out=/proc/lmpt-docs"], capsys, monkeypatch)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_a_run_folder_without_the_keys_it_was_launched_with_is_never_adopted(tmp_path) -> None:
    """A completed run copied in under a grid run's name without its .hydra/ (whatever run it was) is refused before
    anything trains, where it used to be taken as that run."""
    folder = tmp_path / "grid"
    copied = folder / Toy().runs()[0].name
    copied.mkdir(parents=True)
    (copied / "status.json").write_text(json.dumps({"status": "completed"}))
    (copied / "metrics.jsonl").write_text('{"step": 30, "val_loss": 1.0}\n')
    with pytest.raises(LmptError, match="holds files but not the keys it was launched with"):
        grid.plan_grid(Toy(), folder, "1", 60)
    (folder / "empty").mkdir()  # an empty folder is no run: nothing to refuse


def test_the_readme_row_is_replaced_or_added_and_every_other_row_kept(tmp_path) -> None:
    out = tmp_path / "grid"
    toy = Toy()
    conditions = [Condition("parameters", "7M", "0.1M", False)]
    findings = Findings([judge("two seeds agree", Evidence.shows, "2 runs", conditions)], conditions, "2 runs", [])
    summary = write_document(toy, findings, out, {"wall_s": 12.0, "launches": 1}, 34.0).with_suffix(".json")
    readme = tmp_path / "README.md"
    other = "| Someone 2024 | a claim | x | [reproduced](docs/other.md) | `lmpt-reproduce other` | 1m |"
    mine = "| Nobody 2026 | old | y | [not reproduced](grid/toy-for-tests.md) | `lmpt-reproduce toy-for-tests` | 1m |"
    head = "| paper | claim | lmpt's figure | verdict | command | CPU time |\n| --- | --- | --- | --- | --- | --- |"
    readme.write_text(f"# x\n\n{START}\n{head}\n{other}\n{mine}\n{END}\n\nafter\n")
    update_readme(readme, summary)
    text = readme.read_text()
    assert other in text and "old" not in text and "after" in text
    assert "[reproduced (two seeds agree)](grid/toy-for-tests.md)" in text
    update_readme(readme, summary)  # again: the same table, no row doubled
    assert readme.read_text() == text

    reversed_markers = tmp_path / "R.md"
    reversed_markers.write_text(f"{END}\n{START}\n")
    with pytest.raises(LmptError, match="has no table between"):
        update_readme(reversed_markers, summary)
    latin = tmp_path / "L.md"
    latin.write_bytes(f"caf\xe9 {START}\n{END}\n".encode("latin-1"))
    with pytest.raises(LmptError, match="is not UTF-8"):
        update_readme(latin, summary)
    assert latin.read_bytes() == f"caf\xe9 {START}\n{END}\n".encode("latin-1")


def test_a_killed_grid_resumes_completed_runs_kept_and_a_stopped_one_continued(tmp_path, capsys) -> None:
    toy = Toy()
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
    capsys.readouterr()
    grid.run_grid(toy, plan)
    shown = capsys.readouterr().out  # each line numbers the run by its place in the grid, and says how many are done
    assert "[2/2] seed1 started on" in shown and "[2/2] seed1 completed (2 of 2 done)" in shown, shown
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
        grid.plan_grid(Other(), folder, "1", 60)

    # the document and its summary, by default beside the runs; nothing written outside the grid's folder
    reproduce([Toy.name, f"dir={folder}", "reuse=true"])
    text = (folder / "toy-for-tests.md").read_text()
    assert "- two seeds agree: **reproduced** (2 runs; shown although the grid misses parameters" in text
    assert "## Conditions" in text and "| parameters | 7M | 0.1M | **missed** |" in text
    assert "`lmpt-reproduce toy-for-tests`" in text and "torch 2." in text and "threads a run: " in text
    summary = json.loads((folder / "toy-for-tests.json").read_text())
    assert summary["claims"][0]["verdict"] == "reproduced" and summary["produced_by"]["torch"].startswith("2.")
    assert summary["produced_by"]["threads_per_run"] == "lmpt's default (every core)"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["grid"]


FIM_SMALL = ("corpus=[shakespeare]", "ladder=[micro]", "budgets=[41000]")
"""fim's grid on one corpus (one text to prepare before the first run starts), of its smallest runs."""


def test_a_console_reproduction_stopped_by_sigterm_says_how_to_resume(tmp_path) -> None:
    child = subprocess.Popen(
        [sys.executable, "-m", "lmpt.reproduce", "fim", "seeds=1", "slots=1", f"dir={tmp_path / 'g'}", *FIM_SMALL]
        + ["max_minutes=inf"],  # no plan's time to check: no rate to probe before the runs
        cwd=tmp_path,
        env=lmpt_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.time() + 120
    while not list((tmp_path / "g").glob("*/metrics.jsonl")):
        assert time.time() < deadline and child.poll() is None, "no run of the grid logged a step"
        time.sleep(0.1)
    child.send_signal(signal.SIGTERM)
    out, err = child.communicate(timeout=120)
    assert child.returncode == 75 and "run the same command to resume" in err, err
    assert not (tmp_path / "docs").exists() and not list((tmp_path / "g").glob("*.md"))


def test_refusals_name_this_commands_keys_and_come_before_any_run(tmp_path, capsys, monkeypatch) -> None:
    """Found by the hostile sweep: the pool's refusals named study.slots; a README that cannot take the row was found
    after the grid; widths lmpt cannot build, or not whole, were planned."""
    monkeypatch.chdir(tmp_path)
    err = refused(["fim", "slots=99", "dry_run=true"], capsys, monkeypatch)
    assert err.startswith("lmpt: error: slots=99 asks for more slots") and "study." not in err
    err = refused(["fim", "readme=nothere.md", "seeds=1"], capsys, monkeypatch)
    assert "readme=nothere.md cannot be read" in err
    assert "ladder width 33 gives 1 head(s)" in refused(
        ["fim", "ladder=[33]", "scale=paper", "dry_run=true"], capsys, monkeypatch
    )
    assert "ladder=128.5 must be a whole number" in refused(
        ["repetition", "ladder=[128.5,256]", "scale=paper", "dry_run=true"], capsys, monkeypatch
    )
    assert list(tmp_path.iterdir()) == []
