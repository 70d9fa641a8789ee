"""data.unique_tokens=N: training reads only the first N tokens of the training text, the same tokens whatever the
objective or seed; the start line states the epochs over them; bad values are one line, exit 2, nothing written."""

from __future__ import annotations

import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from runner import SMALL, run_lmpt

from lmpt.data.cache import PreparedData
from lmpt.data.sampler import StepLayout
from lmpt.data.sampling import hold_unique_tokens, training_sampler
from lmpt.errors import LmptError

N = 5_000


def test_one_source_spans_the_whole_training_text(shakespeare: PreparedData) -> None:
    """Without data.unique_tokens the sampler's span is the corpus itself: existing runs see the same windows."""
    assert shakespeare.sources[0].train == (0, shakespeare.train.n_tokens)
    assert hold_unique_tokens(shakespeare, None) is shakespeare


@pytest.mark.parametrize("window_length", [65, 64, 80])  # clm and mdlm (seq_len + 1), mlm (seq_len), span (longer)
@pytest.mark.parametrize("seed", [0, 1])
def test_every_window_lies_in_the_first_n_tokens(shakespeare: PreparedData, window_length: int, seed: int) -> None:
    held = hold_unique_tokens(shakespeare, N)
    sampler = training_sampler(held, window_length, StepLayout(16), seed=seed)
    starts = [int(s) for step in range(0, 40) for s in sampler.starts(step)]
    assert min(starts) >= 0 and max(starts) + window_length <= N
    assert held.sources[0].train == (0, N) and held.train is shakespeare.train  # validation untouched
    assert held.sources[0].val == shakespeare.sources[0].val


def test_the_passes_cover_the_n_tokens(shakespeare: PreparedData) -> None:
    sampler = training_sampler(hold_unique_tokens(shakespeare, N), 65, StepLayout(16), seed=3)
    assert sampler.n_windows == (N - 64) // 65  # one epoch visits every window of the N tokens once


@pytest.mark.parametrize(("value", "fragment"), [(10**9, "more than the")])  # below 1: the config (line 76)
def test_bad_counts_are_refused(shakespeare: PreparedData, value: int, fragment: str) -> None:
    with pytest.raises(LmptError, match=f"data.unique_tokens={value:,}.*{fragment}|{fragment}"):
        hold_unique_tokens(shakespeare, value)


def test_a_mixture_is_refused(shakespeare: PreparedData) -> None:
    two = replace(shakespeare, sources=[shakespeare.sources[0], replace(shakespeare.sources[0], name="b")])
    with pytest.raises(LmptError, match="mixes 2 sources"):
        hold_unique_tokens(two, N)


def _launch(tmp_path: Path, *overrides: str, run: str = "run") -> subprocess.CompletedProcess:
    args = [
        *SMALL,
        "trainer.max_steps=4",
        "trainer.eval_every=0",
        "trainer.eval_batches=1",
        "model.n_layers=1",
        "model.d_model=32",
        "model.n_heads=2",
        "model.ffn_dim=64",
        "trainer.sample_tokens=0",
        f"hydra.run.dir={tmp_path / run}",
        *overrides,
    ]
    return run_lmpt(*args, cwd=tmp_path)


@pytest.mark.parametrize(
    ("value", "fragment"),
    [("0", "data.unique_tokens=0"), ("-3", "data.unique_tokens=-3"), ("999999999", "more than the")],
)
def test_bad_counts_end_a_launch_in_one_line_with_nothing_written(tmp_path: Path, value: str, fragment: str) -> None:
    result = _launch(tmp_path, f"data.unique_tokens={value}")
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and lines[0].startswith("lmpt: error:"), result.stderr
    assert fragment in lines[0]
    assert not (tmp_path / "run").exists() and not (tmp_path / "outputs").exists()


def test_the_start_line_states_the_epochs_over_the_unique_tokens(tmp_path: Path) -> None:
    result = _launch(tmp_path, "data.unique_tokens=1000")
    assert result.returncode == 0, result.stderr[-2000:]
    # 4 steps x 8 examples x 65 corpus tokens = 2080 tokens read over 1000 unique ones
    assert "2.08 epochs of the 1,000 train tokens" in result.stdout, result.stdout[-2000:]


def test_a_dry_run_plans_the_epochs_over_the_unique_tokens(tmp_path: Path) -> None:
    _launch(tmp_path, "trainer.max_steps=1")  # tokenises the text once, so the plan knows it
    result = _launch(tmp_path, "data.unique_tokens=1000", "trainer.dry_run=true", run="planned")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "2.08 epochs of the 1,000 train tokens" in result.stdout, result.stdout[-2000:]
