"""The fast subsets scored during training (downstream.score_every, lmpt.downstream.run_tasks) and the refusal of a
score_every that cannot be taken."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from composed import composed
from runner import SMALL, run_lmpt

from lmpt.config.validate import validate_config
from lmpt.downstream.run_tasks import curve_scorer, fast_twin
from lmpt.downstream.task import read_task
from lmpt.errors import LmptError


def test_a_bundled_task_is_scored_on_its_fast_twin_and_others_on_themselves() -> None:
    assert fast_twin("bundled:blimp") == "bundled:blimp-fast"
    assert fast_twin("bundled:blimp.jsonl") == "bundled:blimp-fast"
    assert fast_twin("bundled:blimp-fast") == "bundled:blimp-fast"
    assert fast_twin("bundled:shakespeare-cloze") == "bundled:shakespeare-cloze"  # no twin shipped
    assert fast_twin("tasks/blimp.jsonl") == "tasks/blimp.jsonl"  # a path is never swapped


def test_a_fast_subset_is_a_fixed_sample_in_task_order() -> None:
    whole = read_task("bundled:shakespeare-cloze")
    assert len(whole.items) > 100
    subset = whole.subset(100)
    assert len(subset.items) == 100 and subset.kind == "choice"
    positions = [whole.items.index(q) for q in subset.items]
    assert positions == sorted(positions) and positions != list(range(100))  # drawn, not the first 100
    assert read_task("bundled:shakespeare-cloze").subset(100) == subset  # the same items every time
    assert whole.subset(len(whole.items)) is whole


def test_the_scorer_reads_each_fast_subset_once() -> None:
    cfg = composed(
        "downstream.choice_tasks=[bundled:blimp,bundled:blimp-fast,bundled:shakespeare-cloze]",
        "downstream.score_every=100",
        "downstream.curve_items=40",
    )
    scorer = curve_scorer(cfg.downstream, cfg)
    assert scorer is not None and scorer.every == 100
    assert [(name, len(task.items)) for name, task in scorer.tasks] == [
        ("blimp-fast", 40),
        ("shakespeare-cloze", 40),
    ]
    assert curve_scorer(composed("downstream.choice_tasks=[bundled:blimp-fast]").downstream, cfg) is None


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["downstream.score_every=-5"], "downstream.score_every=-5 is invalid: it must be >= 0"),
        (["downstream.score_every=150"], "it must be a multiple of trainer.eval_every=100"),
        (["downstream.score_every=100", "trainer.eval_every=0"], "it must be 0 while trainer.eval_every=0"),
        (
            ["downstream.score_every=100", "downstream.choice_tasks=[]"],
            "it must be 0 without a zero-shot task in downstream.tasks",
        ),
        (["downstream.curve_items=0"], "downstream.curve_items=0 is invalid: it must be > 0"),
    ],
)
def test_a_score_every_that_cannot_be_taken_is_refused(overrides: list[str], message: str) -> None:
    cfg = composed("downstream.choice_tasks=[bundled:blimp-fast]", *overrides)
    with pytest.raises(LmptError, match=re.escape(message)):
        validate_config(cfg)


def test_the_refusal_is_one_line_and_exit_2_before_any_run(tmp_path: Path) -> None:
    result: subprocess.CompletedProcess = run_lmpt(
        *SMALL,
        "downstream.choice_tasks=[bundled:blimp-fast]",
        "downstream.score_every=150",
        "hydra.run.dir=run",
        cwd=tmp_path,
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert lines[0] == (
        "lmpt: error: downstream.score_every=150 is invalid: it must be a multiple of trainer.eval_every=100"
    )
    assert not (tmp_path / "run").exists()
