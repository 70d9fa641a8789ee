"""lmpt-study over slots: CPU slots split the cores (each run pinned to its group, its threads set from it), GPU slots
give each run its own device (a fake device list here), runs side by side record what the serial study records, bit
for bit, and a study stopped midway resumes only what did not finish; SLURM jobs on the live one-node cluster; each
bad input one line, exit 2, nothing written."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf
from runner import importable, lmpt_env, run_lmpt
from safetensors.torch import load_file
from test_study import STUDY, run_study

from lmpt.cores import core_groups
from lmpt.errors import LmptError
from lmpt.study.pool import GPUS_VAR, Launch, LocalPool, left_runs, plan_slots, write_running

_TRAIN = Path(__file__).resolve().parents[1] / "train"
if str(_TRAIN) not in sys.path:
    sys.path.insert(0, str(_TRAIN))  # tests/train/conftest.py imports its slurm_cluster module from there
_spec = importlib.util.spec_from_file_location("lmpt_tests_train_conftest_slots", _TRAIN / "conftest.py")
_train_conftest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_train_conftest)
slurm_cluster = _train_conftest.slurm_cluster  # the live one-node cluster, reused as it is

TWO_CORES = len(os.sched_getaffinity(0)) >= 2


def _study(**keys: object) -> object:
    return OmegaConf.create({"slots": "1", "slot_device": "auto", "launcher": "local", "slurm": None, **keys})


def test_cpu_slots_split_the_cores_into_groups_each_with_its_thread_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(GPUS_VAR, raising=False)
    cores = lambda: [0, 1, 2, 3, 4]
    assert core_groups([0, 1, 2, 3, 4], 2) == [[0, 1, 2], [3, 4]]
    two = plan_slots(_study(slots="2", slot_device="cpu"), cores)
    assert [s.cores for s in two] == [frozenset({0, 1, 2}), frozenset({3, 4})]
    assert [s.env for s in two] == [{"LMPT_THREADS": "3"}, {"LMPT_THREADS": "2"}]
    assert [s.name for s in plan_slots(_study(slots="auto", slot_device="cpu"), cores)] == [
        "core 0",
        "core 1",
        "core 2",
        "core 3",
        "core 4",
    ]
    (serial,) = plan_slots(_study(slot_device="cpu"), cores)  # one slot: the run takes its threads as lmpt alone does
    assert serial.env == {} and serial.cores is None
    with pytest.raises(LmptError, match=r"study.slots=6 asks for more slots than the 5 core\(s\)"):
        plan_slots(_study(slots="6", slot_device="cpu"), cores)


def _env_probe(out: Path) -> list[str]:
    """A stand-in run: writes the environment and affinity it got, and when it ran."""
    code = (
        "import json, os, sys, time; start = time.time(); time.sleep(0.3); json.dump({'gpu': "
        "os.environ.get('CUDA_VISIBLE_DEVICES'), 'threads': os.environ.get('LMPT_THREADS'), 'cores': "
        "sorted(os.sched_getaffinity(0)), 'start': start, 'end': time.time()}, open(sys.argv[1], 'w'))"
    )
    return [sys.executable, "-c", code, str(out)]


def _run_pool(pool: LocalPool, tmp_path: Path, n: int) -> list[dict]:
    launches = [
        Launch(f"run {i}", tmp_path / f"run{i}", _env_probe(tmp_path / f"run{i}.json"), "clm") for i in range(n)
    ]
    queue, ended = list(launches), []
    while queue or pool.running:
        while queue and pool.free:
            pool.start(queue.pop(0))
        ended += [launch for launch, code in pool.wait() if code == 0]
    assert sorted(e.name for e in ended) == sorted(launch.name for launch in launches)
    assert not (tmp_path / ".running").exists()  # nothing left named once every run ended
    return [json.loads((tmp_path / f"run{i}.json").read_text()) for i in range(n)]


def _never_two_at_once(seen: list[dict], key: str) -> None:
    for value in {s[key] if isinstance(s[key], str) else tuple(s[key]) for s in seen}:
        spans = sorted(
            (s["start"], s["end"]) for s in seen if (s[key] if isinstance(s[key], str) else tuple(s[key])) == value
        )
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False)), f"two runs at once on {value}"


def test_gpu_slots_give_each_run_its_own_device(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(GPUS_VAR, "3,5")  # a fake device list: no GPU here
    slots = plan_slots(_study(slots="auto", slot_device="gpu"))
    share = str(max(1, len(os.sched_getaffinity(0)) // 2))  # the cores shared out between the two runs' threads
    assert [s.env for s in slots] == [{"CUDA_VISIBLE_DEVICES": g, "LMPT_THREADS": share} for g in ("3", "5")]
    seen = _run_pool(LocalPool(tmp_path, slots), tmp_path, 4)
    assert sorted(s["gpu"] for s in seen) == ["3", "3", "5", "5"] and all(s["threads"] == share for s in seen)
    _never_two_at_once(seen, "gpu")
    with pytest.raises(LmptError, match=r"study.slots=3 asks for more slots than the 2 visible GPU\(s\) \(3,5\)"):
        plan_slots(_study(slots="3", slot_device="gpu"))


@pytest.mark.skipif(not TWO_CORES, reason="needs 2 cores")
def test_cpu_slots_pin_each_run_to_its_cores_and_set_its_threads(tmp_path: Path) -> None:
    slots = plan_slots(_study(slots="2", slot_device="cpu"))
    seen = _run_pool(LocalPool(tmp_path, slots), tmp_path, 3)
    groups = sorted({tuple(s["cores"]) for s in seen})
    assert [list(g) for g in groups] == sorted(sorted(s.cores) for s in slots)  # type: ignore[arg-type]
    assert all(s["threads"] == str(len(s["cores"])) and s["gpu"] is None for s in seen)
    _never_two_at_once(seen, "cores")


def test_running_names_every_run_in_flight_and_reads_a_serial_studys_entry(tmp_path: Path) -> None:
    write_running(tmp_path, [{"pid": 11, "run": "a"}, {"job": "7", "run": "b"}])
    assert left_runs(tmp_path) == [{"pid": 11, "run": "a"}, {"job": "7", "run": "b"}]
    (tmp_path / ".running").write_text(json.dumps({"pid": 12, "run": "c"}))  # one entry, as a serial study wrote it
    assert left_runs(tmp_path) == [{"pid": 12, "run": "c"}]
    write_running(tmp_path, [])
    assert not (tmp_path / ".running").exists() and left_runs(tmp_path) == []


def _losses(run: Path) -> list[tuple]:
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line]
    return [(r["step"], k, r[k]) for r in records for k in ("loss", "val_loss") if k in r]


def _runs(study: Path) -> list[Path]:
    return sorted(p.relative_to(study) for p in [*study.glob("search/*/trial-*"), *study.glob("runs/*/*")])


def _record(study: Path) -> dict:
    """study.json with the study's own directory taken out of its paths."""
    return json.loads((study / "study.json").read_text().replace(str(study), "STUDY"))


@pytest.mark.soak  # minutes: CI keeps the pinning, device and bad-input tests; run with -m soak
@pytest.mark.skipif(not TWO_CORES, reason="needs 2 cores")
def test_two_cpu_slots_record_the_serial_study_bit_for_bit_and_a_stopped_study_resumes_only_the_rest(
    tmp_path: Path,
) -> None:
    """The tiny study serially, then over 2 slots of 1 core stopped by SIGTERM once a trial has finished and others
    train: the same command ends it, keeping what finished, and every run's losses and weights, and study.json, are
    the serial study's."""
    serial = run_study(*STUDY, "study.dir=serial", cwd=tmp_path)
    assert serial.returncode == 0, serial.stderr[-3000:]
    args = [*STUDY, "study.dir=slots", "study.slots=2", "study.slot_device=cpu", "trainer.ckpt_every=5"]
    first = subprocess.Popen(
        [sys.executable, "-m", "lmpt.study", *args],
        cwd=tmp_path,
        env=lmpt_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    trials = tmp_path / "slots" / "search"
    deadline = time.monotonic() + 300
    while not list(trials.glob("*/trial-*/status.json")) and first.poll() is None:
        assert time.monotonic() < deadline, "no trial finished"
        time.sleep(0.1)
    first.send_signal(signal.SIGTERM)
    out, err = first.communicate(timeout=300)
    assert first.returncode == 75 and "stopped by SIGTERM; run the same command" in err, out[-2000:] + err[-2000:]
    assert "slots: core 0, core 1" in out and " on core " in out
    assert not (tmp_path / "slots" / ".running").exists()  # both runs in flight ended with the study
    done = {
        p.parent: p.parent.joinpath("metrics.jsonl").read_text()
        for p in trials.glob("*/trial-*/status.json")
        if json.loads(p.read_text())["status"] == "completed"
    }
    assert done
    again = run_study(*args, cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert all(run.joinpath("metrics.jsonl").read_text() == text for run, text in done.items())  # not run again
    assert len(done) < 4 and not any(f"into {run}" in again.stdout for run in done)
    reference, slotted = tmp_path / "serial", tmp_path / "slots"
    assert _runs(reference) == _runs(slotted) and len(_runs(reference)) == 6
    for run in _runs(reference):
        assert _losses(reference / run) == _losses(slotted / run), run
        ours, theirs = load_file(reference / run / "model.safetensors"), load_file(slotted / run / "model.safetensors")
        assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours), run
    expected, got = _record(reference), _record(slotted)
    expected["plan"]["run_overrides"].append("trainer.ckpt_every=5")  # the one run key the slotted study adds
    assert got == expected


def _hide_submitit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`import submitit` fails for the test, as in an install without the slurm extra."""
    fake = tmp_path / "hidden" / "submitit"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('submitit hidden by the test')\n")
    importable(monkeypatch, fake.parent)


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["study.slots=999", "study.slot_device=cpu"], {}, "study.slots=999 asks for more slots than the "),
        (["study.slots=0"], {}, "study.slots=0 is no number of slots"),
        (["study.slot_device=gpu"], {GPUS_VAR: ""}, "study.slot_device=gpu but this machine shows no GPU"),
        (["study.slots=2", "study.slot_device=gpu"], {GPUS_VAR: "0"}, "than the 1 visible GPU(s) (0)"),
        (["study.launcher=slurm"], {"hide": "submitit"}, 'which is not installed: pip install "lmpt[slurm]"'),
        (["study.launcher=cloud"], {}, "study.launcher=cloud must be one of local, slurm"),
        (["study.launcher=slurm", "study.slurm={partitionn:cpu}"], {}, "study.slurm: partitionn is no sbatch option"),
    ],
    ids=["cores", "zero", "no-gpu", "gpus", "no-submitit", "launcher", "slurm-option"],
)
def test_bad_slots_are_one_line_exit_2_and_write_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], env: dict[str, str], message: str
) -> None:
    if env.pop("hide", None):
        _hide_submitit(tmp_path, monkeypatch)
    before = set(tmp_path.iterdir())
    result = run_lmpt(*STUDY, *args, cwd=tmp_path, env=lmpt_env(**env), command="lmpt-study")
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("lmpt: error:") and message in lines[0], result.stderr
    assert set(tmp_path.iterdir()) == before


@pytest.mark.soak  # minutes: CI keeps the pinning, device and bad-input tests; run with -m soak
def test_a_slurm_study_runs_each_run_as_a_job_and_resumes_from_its_records(
    slurm_cluster: object, tmp_path: Path
) -> None:
    args = [*STUDY, "study.objectives=[clm]", "study.launcher=slurm", "study.slots=auto", "study.dir=s"]
    result = run_study(*args, cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    study = tmp_path / "s"
    record = json.loads((study / "study.json").read_text())
    assert [t["status"] for t in record["objectives"]["clm"]["search"]["trials"]] == ["completed", "completed"]
    assert record["objectives"]["clm"]["finals"][0]["status"] == "completed"
    assert result.stdout.count(" on SLURM job ") == 3  # two trials, one final, each a job
    scripts = list((study / ".submitit").glob("*/*_submission.sh"))
    assert len(scripts) == 3 and all("#SBATCH --cpus-per-task=1" in s.read_text() for s in scripts)
    again = run_study(*args, cwd=tmp_path)  # every run found finished by its records: no job submitted
    assert again.returncode == 0 and " on SLURM job " not in again.stdout, again.stderr[-3000:]
    assert "search clm: 2 trials done, reused" in again.stdout


def test_the_benchmark_prints_the_two_studies_it_would_time(tmp_path: Path) -> None:
    script = Path(__file__).resolve().parents[2] / "scripts" / "bench_study_slots.py"
    command = [sys.executable, str(script), "--dry", "--dir", str(tmp_path), "--", "study.trials=2"]
    result = subprocess.run(command, env=lmpt_env(), capture_output=True, text=True, timeout=120)
    if not TWO_CORES:
        assert result.returncode != 0 and "needs 2 cores" in result.stderr
        return
    assert result.returncode == 0, result.stderr
    serial, slotted = [line for line in result.stdout.splitlines() if "-m lmpt.study" in line]
    assert serial.startswith("serial: ") and f"study.dir={tmp_path / 'serial'}" in serial
    assert "study.trials=2 study.slots=1 study.dir=" in serial  # one run at a time: the default is a slot per core
    assert "study.trials=2 study.slots=2 study.slot_device=cpu" in slotted and not list(tmp_path.iterdir())
