"""scripts/gpu_check.sh: its CPU dry mode runs every step of the GPU checklist (nanoGPT's through a stand-in checkout
that logs as nanoGPT does) and leaves each step's figure and the summary under one folder; bad input is one line and
exit 2 before anything runs; a failed, timed-out or missing step is said in the summary, never dropped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "gpu_check.sh"
sys.path.insert(0, str(REPO / "scripts"))
import gpu_check  # noqa: E402

STEPS = [
    "smoke",
    "smoke_bf16",
    "smoke_fp16",
    "decoder_124m",
    "nanogpt_124m",
    "encoder_128",
    "encoder_512",
    "resume_deterministic",
    "resume",
    "torchrun_ddp",
    "torchrun_fsdp",
]

FAKE_NANOGPT = """
import os, sys
exec(open("configurator.py").read())  # as nanoGPT's train.py does: it runs from its own folder
assert os.path.getsize("data/gpu_check/train.bin") > 0 and "--dataset=gpu_check" in sys.argv, sys.argv
print("tokens per iteration will be: 64")
for i in range(8):
    print(f"iter {i}: loss 10.0, time {20.0 if i < 5 else 4.0:.2f}ms, mfu 1.00%")
"""


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "GPU_CHECK_DRY", "OUT")}
    return {**env, "OMP_NUM_THREADS": "1"}  # tiny models: threads only fight over the shared cores


def _check(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 60):
    return subprocess.run(
        ["bash", str(SCRIPT), *args], cwd=cwd, env=env or _env(), capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.soak  # about 2 minutes on 2 quiet cores: CI runs the two-step twin below
def test_the_dry_mode_runs_every_step_and_leaves_each_figure_and_the_summary(tmp_path: Path) -> None:
    nanogpt = tmp_path / "nanoGPT"
    nanogpt.mkdir()
    (nanogpt / "train.py").write_text(FAKE_NANOGPT)
    (nanogpt / "model.py").write_text("")
    (nanogpt / "configurator.py").write_text("")
    out = tmp_path / "out"
    done = _check("--dry", "--nanogpt", str(nanogpt), str(out), cwd=tmp_path, timeout=1500)
    assert done.returncode == 0, done.stderr[-3000:]
    results = {name: json.loads((out / name / "result.json").read_text()) for name in STEPS}
    assert {name: r["status"] for name, r in results.items()} == dict.fromkeys(STEPS, "ok"), results
    assert all(r["figure"] and (out / r["step"] / "log.txt").exists() for r in results.values())
    assert "bit for bit over 40 steps" in results["resume_deterministic"]["figure"]
    assert "largest loss difference" in results["resume"]["figure"]
    assert results["nanogpt_124m"]["figure"].startswith("16,000 tok/s (64 tokens per iteration, median 4.0 ms")
    assert "lmpt" in results["decoder_124m"]["figure"] and "GPT2LMHeadModel" in results["decoder_124m"]["figure"]
    assert "seq 32" in results["encoder_128"]["figure"] and "seq 64" in results["encoder_512"]["figure"]
    assert "warning line" in results["smoke"]["figure"] and "over 6 steps" in results["smoke"]["figure"]
    summary = (out / "summary.md").read_text()
    assert "CPU dry run" in summary and all(f"| {name} | ok |" in summary for name in STEPS)
    assert done.stdout.rstrip().endswith(summary.rstrip().splitlines()[-1])  # printed at the end too


def test_the_dry_mode_of_the_steps_asked_for_runs_them_and_lists_the_rest_as_skipped(tmp_path: Path) -> None:
    out = tmp_path / "out"
    env = {**_env(), "GPU_CHECK_STEPS": "smoke,resume_deterministic"}
    done = _check("--dry", str(out), cwd=tmp_path, env=env, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    results = {name: json.loads((out / name / "result.json").read_text()) for name in STEPS}
    asked = {"smoke", "resume_deterministic"}
    assert {name for name, r in results.items() if r["status"] == "ok"} == asked, results
    assert all(r["status"] == "skipped" for name, r in results.items() if name not in asked)
    assert "bit for bit over 40 steps" in results["resume_deterministic"]["figure"]
    assert "over 6 steps" in results["smoke"]["figure"]
    summary = (out / "summary.md").read_text()
    assert "| smoke | ok |" in summary and "| torchrun_fsdp | skipped |" in summary


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--bogus"], "unknown option --bogus"),
        (["--nanogpt"], "--nanogpt needs the path"),
        (["a", "b"], "two output folders given"),
        (["full"], "full is not empty"),
        (["new"], "no CUDA GPU is visible to torch: run scripts/gpu_check.sh --dry"),
    ],
)
def test_bad_input_is_one_line_and_exit_2_before_anything_runs(tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine")
    env = {**_env(), "CUDA_VISIBLE_DEVICES": ""}  # no GPU, even on a machine with one
    done = _check(*args, cwd=tmp_path, env=env)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("gpu_check.sh: error: ") and message in done.stderr
    assert (tmp_path / "full" / "keep.txt").read_text() == "mine" and not (tmp_path / "a").exists()
    assert not (tmp_path / "new").exists() or not any((tmp_path / "new").iterdir())


def test_a_failed_or_timed_out_step_is_said_and_a_step_that_never_ran_is_listed(tmp_path: Path) -> None:
    failed, slow = tmp_path / "smoke", tmp_path / "decoder_124m"
    for step in (failed, slow):
        step.mkdir()
        (step / "log.txt").write_text("starting\nRuntimeError: CUDA out of memory\n")
    assert gpu_check.figure("run", failed, rc=1, seconds=3.0, timeout=60)["status"] == "failed"
    assert "CUDA out of memory" in json.loads((failed / "result.json").read_text())["figure"]
    timed = gpu_check.figure("bench", slow, rc=124, seconds=180.0, timeout=180)
    assert (timed["status"], timed["figure"]) == ("timed out", "stopped after its 180 s limit")
    (tmp_path / "steps.txt").write_text("smoke\ndecoder_124m\nresume\n")
    summary = gpu_check.summary(tmp_path)
    rows = [line for line in summary.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert [row.split(" | ")[0:2] for row in rows] == [
        ["| smoke", "failed"],
        ["| decoder_124m", "timed out"],
        ["| resume", "not run"],
    ]


def test_warnings_of_lmpt_and_of_python_are_counted() -> None:
    log = "WARNING trainer.precision=fp16: emulated\nx.py:3: UserWarning: slow\nno warnings here\n"
    assert len(gpu_check.warnings_in(log)) == 2
