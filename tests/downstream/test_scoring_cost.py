"""The downstream scoring a study's time plan counts (lmpt.downstream.run_tasks): rows as each reading reads a choice,
each task kind counting its own records, the control doubling the end-of-run scoring, curve points their fast
subsets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lmpt.config.schema import DownstreamConfig
from lmpt.downstream.run_tasks import curve_tokens, scoring_tokens
from lmpt.downstream.task import ScoringRun


def downstream(choice: list[str], classification: list[str] = (), score_every: int = 0, control: str = "none"):
    return DownstreamConfig(
        choice_tasks=choice,
        classification_tasks=list(classification),
        score_every=score_every,
        curve_items=3,
        control=control,
        mode="probe",
        seeds=2,
        epochs=1,
        batch_size=4,
        lr="fixed",
        max_train_examples=None,
    )


def test_a_choice_is_one_row_left_to_right_a_row_per_token_by_pll_and_a_row_per_draw_own() -> None:
    base = ScoringRun("decoder", 64, None)
    context, choice = "a" * 8, "b" * 12  # 2 and 3 tokens at 4 characters a token, and the separator
    assert base.choice_tokens(context, choice) == 6
    assert ScoringRun("encoder", 64, None, row_per_scored_token=True).choice_tokens(context, choice) == 6 * 4
    assert ScoringRun("encoder", 64, None, rows_per_choice=8).choice_tokens(context, choice) == 6 * 8


@pytest.fixture
def pairs(tmp_path: Path) -> Path:
    path = tmp_path / "pairs.jsonl"
    records = [{"sentence_good": "a" * 20, "sentence_bad": "b" * 16} for _ in range(5)]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_a_task_counts_every_record_and_the_control_doubles_it(pairs: Path) -> None:
    one = scoring_tokens(ScoringRun("decoder", 64, downstream([str(pairs)])))
    assert one == 5 * ((0 + 5 + 1) + (0 + 4 + 1))  # each sentence after an empty context
    with_control = scoring_tokens(ScoringRun("decoder", 64, downstream([str(pairs)], control="scratch"), models=2))
    assert with_control == 2 * one


def test_curve_points_score_the_fast_subset_every_score_every_steps(pairs: Path) -> None:
    run = ScoringRun("decoder", 64, downstream([str(pairs)], score_every=10), models=2)
    per_point = 3 * ((0 + 5 + 1) + (0 + 4 + 1))  # curve_items=3 of the 5 pairs, the run's model alone
    assert curve_tokens(run, 35) == 3 * per_point  # steps 10, 20, 30 (35's point is the end-of-run scoring)
    assert curve_tokens(run, 10) == 0


def test_a_fine_tuned_task_counts_its_examples_through_the_body_search_included() -> None:
    fixed = ScoringRun("encoder", 64, downstream([], ["bundled:shakespeare-order"]))
    searched_cfg = downstream([], ["bundled:shakespeare-order"])
    searched_cfg.lr = "search"
    searched = ScoringRun("encoder", 64, searched_cfg)
    assert 0 < scoring_tokens(fixed) < scoring_tokens(searched)
