"""Crash-safe commits and corruption (issue #4, points 3 and 4): a death at any point of a checkpoint write
needs no cleanup and resumes from the newest committed checkpoint; a damaged newest checkpoint is named
in a loud warning and skipped for the previous one, nothing deleted; none valid refuses to start."""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import shutil
from pathlib import Path

import pytest
import safetensors.torch
import torch
from golden import BASE, KILLED, assert_same, describe, golden_run, interrupted_run, run

from lmpt.errors import LmptError
from lmpt.rundir.checkpoint import MANIFEST, CheckpointStore, load_parts

SEED = 4


# -- in-process fault injection: a simulated death at every fault point of a save ------------------------


class Death(BaseException):
    """Like SIGKILL, it skips `except OSError` cleanups (and every `except Exception`)."""


class FaultPoints:
    """Patches what CheckpointStore.save calls; raises Death at fault point `kill_at` (1-based)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, kill_at: int | None) -> None:
        self.kill_at, self.count, self.labels = kill_at, 0, []
        self.committed: set[str] = set()  # step directories whose commit rename completed
        real_save, real_fsync, real_dump = torch.save, os.fsync, json.dump
        real_save_file = safetensors.torch.save_file
        real_rename, real_rmtree = os.rename, shutil.rmtree

        def save(obj, f, *args, **kwargs):
            self.point("before torch.save")
            if self.point("mid torch.save", die=False):
                buffer = io.BytesIO()
                real_save(obj, buffer, *args, **kwargs)
                f.write(buffer.getvalue()[: len(buffer.getvalue()) // 2])
                raise Death("mid torch.save")
            real_save(obj, f, *args, **kwargs)
            self.point("after torch.save")

        def save_file(tensors, filename, metadata=None):
            self.point("before safetensors write")
            if self.point("mid safetensors write", die=False):
                data = safetensors.torch.save(tensors, metadata)
                Path(filename).write_bytes(data[: len(data) // 2])
                raise Death("mid safetensors write")
            real_save_file(tensors, filename, metadata=metadata)
            self.point("after safetensors write")

        def fsync(fd):
            self.point("before fsync")
            real_fsync(fd)
            self.point("after fsync")

        def dump(obj, f, *args, **kwargs):
            self.point("before json.dump")
            if self.point("mid json.dump", die=False):
                text = json.dumps(obj, *args, **kwargs)
                f.write(text[: len(text) // 2])
                raise Death("mid json.dump")
            real_dump(obj, f, *args, **kwargs)
            self.point("after json.dump")

        def rename(src, dst, *args, **kwargs):
            label = f"rename {Path(src).name} -> {Path(dst).name}"
            self.point(f"before {label}")
            real_rename(src, dst, *args, **kwargs)
            if Path(src).name.startswith(".tmp-"):
                self.committed.add(Path(dst).name)
            self.point(f"after {label}")

        def rmtree(path, *args, **kwargs):
            self.point(f"before rmtree {Path(path).name}")
            if self.point(f"mid rmtree {Path(path).name}", die=False):
                if Path(path).is_dir():
                    files = sorted(p for p in Path(path).iterdir() if p.is_file())
                    for p in files[: max(1, len(files) // 2)]:
                        p.unlink()
                raise Death("mid rmtree")
            real_rmtree(path, *args, **kwargs)
            self.point(f"after rmtree {Path(path).name}")

        monkeypatch.setattr(torch, "save", save)
        monkeypatch.setattr(safetensors.torch, "save_file", save_file)
        monkeypatch.setattr(os, "fsync", fsync)
        monkeypatch.setattr(json, "dump", dump)
        monkeypatch.setattr(os, "rename", rename)
        monkeypatch.setattr(shutil, "rmtree", rmtree)

    def point(self, label: str, die: bool = True) -> bool:
        self.count += 1
        self.labels.append(label)
        hit = self.count == self.kill_at
        if hit and die:
            raise Death(label)
        return hit


def parts(step: int, version: int = 0) -> dict:
    """Three files like a real checkpoint; contents depend on the step (and on which attempt wrote it)."""
    g = torch.Generator().manual_seed(step * 100 + version)
    return {
        "model.safetensors": {"w": torch.randn(256, generator=g), "b": torch.randn(8, generator=g)},
        "optimizer.pt": {"state": {0: {"exp_avg": torch.randn(256, generator=g)}}, "param_groups": [{"lr": 0.1}]},
        "trainer.pt": {"step": step, "rng": {"cpu": torch.get_rng_state()}, "version": version},
    }


def same_parts(loaded: dict, expected: dict) -> bool:
    """`load_parts` output (by stem) holds what `parts` wrote (by file name)."""
    expected = {Path(name).stem: value for name, value in expected.items()}

    def equal(a, b) -> bool:
        if isinstance(a, torch.Tensor):
            return isinstance(b, torch.Tensor) and torch.equal(a, b)
        if isinstance(a, dict):
            return isinstance(b, dict) and a.keys() == b.keys() and all(equal(a[k], b[k]) for k in a)
        if isinstance(a, list):
            return isinstance(b, list) and len(a) == len(b) and all(equal(x, y) for x, y in zip(a, b, strict=True))
        return a == b

    return equal(loaded, expected)


def flip_a_bit(path: Path, rng: random.Random) -> None:
    data = bytearray(path.read_bytes())
    data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    path.write_bytes(bytes(data))


def snapshot(directory: Path) -> dict[str, str]:
    """Every file under `directory` by relative path, with a hash of its bytes; not .lock, which holds the PID of
    the last process that ran there."""
    return {
        str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.rglob("*"))
        if p.is_file() and p.name != ".lock"
    }


def count_fault_points(tmp: Path, scenario: str, monkeypatch: pytest.MonkeyPatch) -> int:
    directory = prepare(tmp / "count", scenario)
    faults = FaultPoints(monkeypatch, kill_at=None)
    store_save(directory, scenario)
    monkeypatch.undo()
    return faults.count


SCENARIOS = {
    # step 3 after steps 1 and 2: write, commit, prune step 1
    "new step": (3, 0),
    # step 2 again after resuming from step 1 because step 2 is corrupt: the old attempt moves aside
    "same step again": (2, 1),
}


def prepare(directory: Path, scenario: str) -> Path:
    store = CheckpointStore(directory, keep_last=2)
    store.save(1, parts(1))
    store.save(2, parts(2))
    if scenario == "same step again":
        flip_a_bit(directory / "step_00000002" / "model.safetensors", random.Random(1))
    return directory


def store_save(directory: Path, scenario: str) -> None:
    step, version = SCENARIOS[scenario]
    CheckpointStore(directory, keep_last=2).save(step, parts(step, version))


def test_a_death_at_every_fault_point_of_a_save_needs_no_cleanup(tmp_path: Path, monkeypatch, capsys) -> None:
    trials = 0
    for scenario, (step, version) in SCENARIOS.items():
        n_points = count_fault_points(tmp_path / scenario, scenario, monkeypatch)
        assert n_points >= 25, n_points
        for kill_at in range(1, n_points + 1):
            directory = prepare(tmp_path / scenario / f"trial-{kill_at}", scenario)
            faults = FaultPoints(monkeypatch, kill_at)
            with pytest.raises(Death):
                store_save(directory, scenario)
            monkeypatch.undo()
            where = f"{scenario}: death at fault point {kill_at}/{n_points} ({faults.labels[-1]})"
            new_name = f"step_{step:08d}"
            expected = (step, version) if new_name in faults.committed else (1 if version else 2, 0)

            # a new process: finds the newest committed checkpoint with no manual step in between
            store = CheckpointStore(directory, keep_last=2)
            latest = store.latest_valid()
            assert latest is not None and latest.name == f"step_{expected[0]:08d}", where
            assert same_parts(load_parts(latest), parts(*expected)), where
            store.remove_leftovers()  # what `lmpt` does before training
            assert not [p.name for p in directory.iterdir() if p.name.startswith((".tmp-", ".trash-"))], where
            # ... and the run goes on: the next save commits and prunes as usual
            store.save(expected[0] + 1, parts(expected[0] + 1))
            names = sorted(p.name for p in directory.iterdir())
            assert names == [f"step_{expected[0]:08d}", f"step_{expected[0] + 1:08d}"], (where, names)
            assert store.latest_valid().name == f"step_{expected[0] + 1:08d}", where
            trials += 1
    assert trials >= 50
    capsys.readouterr()


# -- corruption of the newest checkpoint ---------------------------------------------------------------------


def corrupt(path: Path, how: str, rng: random.Random) -> None:
    if how == "truncated":
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    elif how == "zeroed":
        path.write_bytes(bytes(path.stat().st_size))
    elif how == "bit-flipped":
        flip_a_bit(path, rng)
    else:
        path.unlink()


@pytest.mark.parametrize("how", ["truncated", "zeroed", "bit-flipped", "missing"])
@pytest.mark.parametrize("name", ["model.safetensors", "optimizer.pt", "trainer.pt", MANIFEST])
def test_a_damaged_newest_checkpoint_is_named_and_skipped(tmp_path: Path, capsys, how: str, name: str) -> None:
    store = CheckpointStore(tmp_path / "checkpoints", keep_last=3)
    for step in (1, 2, 3):
        store.save(step, parts(step))
    corrupt(tmp_path / "checkpoints" / "step_00000003" / name, how, random.Random(f"{SEED}-{how}-{name}"))
    before = snapshot(tmp_path)
    capsys.readouterr()

    latest = CheckpointStore(tmp_path / "checkpoints", keep_last=3).latest_valid()
    assert latest is not None and latest.name == "step_00000002"
    assert same_parts(load_parts(latest), parts(2))
    out = " ".join(capsys.readouterr().out.split())
    assert "WARNING" in out and "step_00000003" in out and name in out, out
    assert snapshot(tmp_path) == before  # nothing deleted or rewritten


def test_no_valid_checkpoint_refuses_to_start_over(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path / "checkpoints", keep_last=2)
    store.save(1, parts(1))
    store.save(2, parts(2))
    flip_a_bit(tmp_path / "checkpoints" / "step_00000001" / "optimizer.pt", random.Random(0))
    (tmp_path / "checkpoints" / "step_00000002" / "trainer.pt").unlink()
    before = snapshot(tmp_path)
    with pytest.raises(LmptError, match="no valid checkpoint.*step_00000002.*trainer.pt.*step_00000001.*optimizer.pt"):
        store.latest_valid()
    assert snapshot(tmp_path) == before


# -- the real command: deaths inside a checkpoint write, a corrupt newest checkpoint, none valid ----------


@pytest.mark.soak  # CI keeps the 68 in-process fault trials and the real-process corruption fallback
def test_killed_inside_checkpoint_writes_resumes_bitwise(tmp_path: Path, tmp_path_factory) -> None:
    """Real processes killed (SIGKILL) at random fault points of the 1st and 3rd save (the 3rd also prunes)."""
    golden = golden_run(tmp_path_factory.mktemp("golden"), BASE)
    rng = random.Random(f"{SEED}-process-faults")
    per_save = 29  # fault points of a first save (three files, manifest, commit); a pruning save has more
    kills = [rng.randint(1, per_save), *sorted(rng.sample(range(2 * per_save + 1, 3 * per_save + 6), 3))]
    for i, kill_at in enumerate(kills):
        trace = tmp_path / f"trace-{i}.txt"
        faults = {"LMPT_TEST_KILL_AT_FAULT": str(kill_at), "LMPT_TEST_FAULT_TRACE": str(trace)}
        run_dir = tmp_path / f"run-{i}"
        result = run(run_dir, BASE, **faults)
        where = f"death at fault point {kill_at} ({trace.read_text().splitlines()[-1]}; seed {SEED})"
        assert result.returncode == KILLED, f"{where}: {describe(result)}"
        result = run(run_dir, BASE)  # the same command, no cleanup in between
        assert result.returncode == 0, f"{where}: {describe(result)}"
        assert_same(golden, run_dir, where)
        assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["step_00000012", "step_00000016"]


def test_corrupt_newest_checkpoint_falls_back_and_ends_golden(tmp_path: Path, tmp_path_factory) -> None:
    golden = golden_run(tmp_path_factory.mktemp("golden"), BASE)
    run_dir = tmp_path / "run"
    result = run(run_dir, BASE, LMPT_TEST_KILL_AFTER_BACKWARD="10")  # checkpoints 4 and 8 committed
    assert result.returncode == KILLED, describe(result)
    bad = run_dir / "checkpoints" / "step_00000008" / "optimizer.pt"
    flip_a_bit(bad, random.Random(SEED))
    damaged = bad.read_bytes()

    result = run(run_dir, BASE, LMPT_TEST_KILL_AFTER_BACKWARD="1")  # restarts, then dies in step 5
    assert result.returncode == KILLED, describe(result)
    out = " ".join(result.stdout.split())
    assert "WARNING" in out and "step_00000008" in out and "optimizer.pt" in out, out
    assert "from step_00000004" in out, out
    assert bad.read_bytes() == damaged  # kept for inspection until the resumed run commits step 8 again

    interrupted_run(tmp_path, BASE, [], name="run")
    assert_same(golden, run_dir, "newest checkpoint bit-flipped")


def test_no_valid_checkpoint_is_one_line_exit_2_and_nothing_changes(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    result = run(run_dir, BASE, LMPT_TEST_KILL_AFTER_BACKWARD="10")
    assert result.returncode == KILLED, describe(result)
    (run_dir / "checkpoints" / "step_00000004" / "model.safetensors").write_bytes(b"")
    (run_dir / "checkpoints" / "step_00000008" / MANIFEST).unlink()
    before = snapshot(run_dir)
    result = run(run_dir, BASE)
    assert result.returncode == 2, describe(result)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("lmpt: error: no valid checkpoint"), result.stderr
    assert "step_00000004" in lines[0] and "model.safetensors" in lines[0] and "step_00000008" in lines[0], lines[0]
    assert snapshot(run_dir) == before
