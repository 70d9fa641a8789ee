"""RUN/best: the weights of the lowest val_loss kept beside the last checkpoint, carried through a kill and resume
bit for bit, usable by lmpt-eval, -finetune and -export as RUN/best, and refused in one line for a run that never
evaluated."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
from golden import BASE, assert_same, describe, golden_run, interrupted_run, run
from runner import val_losses
from safetensors.torch import load_file

from lmpt.config.command_options import run_command
from lmpt.config.schema import DownstreamConfig
from lmpt.downstream.eval_cli import evaluate
from lmpt.downstream.finetune_cli import finetune_command
from lmpt.hf.export import export
from lmpt.rundir.checkpoint import load_part

_OVERRIDDEN = ("trainer.eval_every=", "trainer.ckpt_every=", "trainer.keep_last=")
EVERY_EVAL = [
    *(a for a in BASE if not a.startswith(_OVERRIDDEN)),
    "optimizer.lr=0.1",
    "trainer.eval_every=2",
    "trainer.ckpt_every=2",
    "trainer.keep_last=8",
]
"""16 steps, an evaluation and a checkpoint every 2 (all kept): the val_loss of step 8 is above step 6's."""
KILLED_ARGS = [*(a for a in EVERY_EVAL if not a.startswith("trainer.ckpt_every=")), "trainer.ckpt_every=4"]
"""As EVERY_EVAL with a checkpoint every 4: a kill after step 6 leaves RUN/best newer than the checkpoint."""


def _best(run_dir: Path) -> tuple[dict, dict[str, torch.Tensor]]:
    return json.loads((run_dir / "best" / "best.json").read_text()), load_file(run_dir / "best" / "model.safetensors")


def _same_weights(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_best_is_the_lowest_val_loss_and_its_weights(tmp_path: Path) -> None:
    run_dir = golden_run(tmp_path, EVERY_EVAL)
    losses = val_losses(run_dir)
    best_step = min(losses, key=lambda s: (losses[s], s))  # a tie keeps the earlier step
    record, weights = _best(run_dir)
    assert record == {"step": best_step, "val_loss": losses[best_step]}
    checkpoint = run_dir / "checkpoints" / f"step_{best_step:08d}"
    assert _same_weights(weights, load_file(checkpoint / "model.safetensors"))
    behind = 0  # checkpoints whose best is an earlier step than their own: best and last differ there
    for step in sorted(losses):
        trainer = load_part(run_dir / "checkpoints" / f"step_{step:08d}", "trainer")
        so_far = {s: v for s, v in losses.items() if s <= step}
        expected = min(so_far, key=lambda s: (so_far[s], s))
        assert trainer["best"] == {"step": expected, "val_loss": losses[expected]}, step
        behind += expected != step
    assert behind, f"every evaluation improved ({losses}): the test no longer shows a best apart from the last"


@pytest.mark.soak  # ~16 s: a kill and resume; CI checks the best itself
def test_resume_after_a_kill_keeps_the_same_best(tmp_path: Path) -> None:
    golden = golden_run(tmp_path, KILLED_ARGS)
    killed = interrupted_run(tmp_path, KILLED_ARGS, [{"LMPT_TEST_KILL_AFTER_BACKWARD": "7"}])
    assert_same(golden, killed, "killed after step 6, resumed from step 4")
    (record, weights), (killed_record, killed_weights) = _best(golden), _best(killed)
    assert killed_record == record and _same_weights(killed_weights, weights)


def _command(body, argv: list[str], capsys, monkeypatch) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "argv", ["lmpt", *argv])
    with pytest.raises(SystemExit) as exit_info:
        run_command(body)
    out, err = capsys.readouterr()
    return exit_info.value.code, out, err


def test_lmpt_eval_on_best_and_last_gives_their_checkpoints_figures(tmp_path: Path, capsys, monkeypatch) -> None:
    run_dir = golden_run(tmp_path, EVERY_EVAL)
    text = tmp_path / "eval.txt"
    text.write_text("To be, or not to be, that is the question.\nWhether 'tis nobler in the mind to suffer.\n" * 20)
    best_step = json.loads((run_dir / "best" / "best.json").read_text())["step"]

    def figures(target: Path) -> dict:
        code, out, err = _command(evaluate, [str(target), f"data={text}", "json=true"], capsys, monkeypatch)
        assert code == 0, err
        return json.loads(out.strip().splitlines()[-1])

    checkpoints = run_dir / "checkpoints"
    assert figures(run_dir / "best") == figures(checkpoints / f"step_{best_step:08d}")
    assert figures(run_dir) == figures(checkpoints / "step_00000016")


def test_a_run_that_never_evaluated_has_no_best(tmp_path: Path, capsys, monkeypatch) -> None:
    args = [
        *(a for a in BASE if not a.startswith(("trainer.eval_every=", "trainer.max_steps="))),
        "trainer.eval_every=0",
        "trainer.max_steps=2",
    ]
    run_dir = tmp_path / "run"
    result = run(run_dir, args)
    assert result.returncode == 0, describe(result)
    assert not (run_dir / "best").exists()
    assert load_part(run_dir / "checkpoints" / "step_00000002", "trainer")["best"] == {}
    expected = f"{run_dir} has no best checkpoint: it never evaluated (trainer.eval_every=0): use the last"
    out_dir = tmp_path / "exported"
    task = tmp_path / "task.jsonl"
    task.write_text("".join(json.dumps({"text": f"text {i}", "label": i % 2}) + "\n" for i in range(8)))
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    for body, argv in (
        (evaluate, [str(run_dir / "best"), "task=bundled:blimp-fast"]),
        (export, [str(run_dir / "best"), str(out_dir)]),
        (finetune_command, [str(run_dir / "best"), f"data.train={task}", f"data.dev={task}"]),
    ):
        code, _, err = _command(body, argv, capsys, monkeypatch)
        assert code == 2 and err.startswith(f"lmpt: error: {expected}") and err.count("\n") == 1, err
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before  # nothing written


def test_downstream_weights_best_scores_the_best_checkpoint_not_the_last(tmp_path: Path, capsys, monkeypatch) -> None:
    import shutil

    from lmpt.downstream.run_tasks import score_downstream

    task = tmp_path / "cloze.jsonl"
    words = ["king", "lord", "night", "heart", "death", "love"]
    task.write_text(
        "".join(
            json.dumps(
                {
                    "context": f"My good {words[i % 6]}, I pray thee, hear my",
                    "choices": [words[(i + j) % 6] for j in range(3)],
                    "label": i % 3,
                }
            )
            + "\n"
            for i in range(24)
        )
    )
    run_dir = golden_run(tmp_path, [*EVERY_EVAL, "downstream.weights=best", f"downstream.choice_tasks=[{task}]"])
    record = json.loads((run_dir / "downstream" / "cloze.json").read_text())
    assert record["weights"] == "best"
    best_step = json.loads((run_dir / "best" / "best.json").read_text())["step"]
    assert f"scoring the best weights: step {best_step}," in (run_dir / "lmpt.log").read_text()

    def scored(target: Path) -> dict:
        argv = [str(target), f"task={task}", "json=true", "control=scratch"]
        code, out, err = _command(evaluate, argv, capsys, monkeypatch)
        assert code == 0, err
        return json.loads(out.strip().splitlines()[-1])

    assert {k: v for k, v in record.items() if k != "weights"} == scored(run_dir / "best")
    # a copy whose best is step 2's weights: scoring with weights=best reads them, weights=last the final model
    copy = tmp_path / "copy"
    shutil.copytree(run_dir, copy)
    shutil.copy(copy / "checkpoints" / "step_00000002" / "model.safetensors", copy / "best" / "model.safetensors")
    (copy / "best" / "best.json").write_text(json.dumps({"step": 2, "val_loss": 9.0}) + "\n")
    for weights, target in (("best", copy / "best"), ("last", copy)):
        downstream = DownstreamConfig(choice_tasks=[str(task)], weights=weights, batch_size=8, control="scratch")
        score_downstream(downstream, copy, 16)
        again = json.loads((copy / "downstream" / "cloze.json").read_text())
        assert again["weights"] == weights
        assert {k: v for k, v in again.items() if k != "weights"} == scored(target), weights


def test_downstream_weights_best_is_refused_at_start_up_without_evaluations(tmp_path: Path) -> None:
    args = [
        *(a for a in BASE if not a.startswith("trainer.eval_every=")),
        "trainer.eval_every=0",
        "downstream.weights=best",
        "downstream.choice_tasks=[bundled:blimp-fast]",
    ]
    result = run(tmp_path / "run", args)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, describe(result)
    assert "downstream.weights='best' is invalid: it must be last while trainer.eval_every=0" in result.stderr
    assert not (tmp_path / "run" / "checkpoints").exists()
