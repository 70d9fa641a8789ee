"""Issue 32's broken promises at the downstream edge of a training run: a classification task fine-tuned with one
seed (no spread to report) completes and logs what it has, and an electra run is refused zero-shot tasks at
start-up, by the rule lmpt-eval follows, instead of being scored through its discriminator's untrained token head."""

from __future__ import annotations

import json
from pathlib import Path

from runner import TINY_RUN, run_lmpt

from lmpt.downstream.bundled import tasks_dir

TINY = [
    *TINY_RUN,
    "trainer.max_steps=3",
]


def _head(source: Path, target: Path, lines: int) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("".join(source.read_text().splitlines(keepends=True)[:lines]))


def test_one_seed_of_a_classification_task_completes_and_logs_no_spread(tmp_path: Path) -> None:
    task = tmp_path / "order"
    for split, lines in (("train", 48), ("dev", 24)):
        _head(tasks_dir() / "shakespeare-order" / f"{split}.jsonl", task / f"{split}.jsonl", lines)
    run = tmp_path / "run"
    done = run_lmpt(
        *TINY,
        f"hydra.run.dir={run}",
        f"downstream.classification_tasks=[{task}]",
        "downstream.seeds=1",
        "downstream.epochs=1",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads((run / "status.json").read_text())["status"] == "completed"
    logged = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    figures = {k: v for record in logged for k, v in record.items() if k.startswith("downstream/order/")}
    assert "downstream/order/accuracy_mean" in figures and "downstream/order/accuracy_std" not in figures
    assert all(isinstance(v, float) for v in figures.values())


def test_an_electra_run_is_refused_zero_shot_tasks_before_training(tmp_path: Path) -> None:
    run = tmp_path / "run"
    done = run_lmpt(
        *TINY,
        f"hydra.run.dir={run}",
        "objective=electra",
        "downstream.choice_tasks=[bundled:shakespeare-cloze]",
        cwd=tmp_path,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "downstream.choice_tasks" in done.stderr and "electra" in done.stderr
    assert not run.exists()
