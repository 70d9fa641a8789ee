"""Resume is O(1) (issue #4, point 6): the batches of step k are made directly, without computing any
earlier step's windows; counted in operations, not timed. (The real command's restart is traced in
test_golden_resume: its first batch is the checkpoint's step.)"""

from __future__ import annotations

from collections import Counter

import pytest
import torch

import lmpt.data.sampler as sampler_module
import lmpt.train.batches as batches_module
from lmpt.data.permutation import FeistelPermutation
from lmpt.data.sampler import StepLayout, WindowSampler
from lmpt.objectives.clm import ClmConfig
from lmpt.objectives.registry import build_objective
from lmpt.objectives.span import SpanConfig
from lmpt.train.batches import StepBatches, step_loader

FAR = 10**9
BATCH, SEQ_LEN, ACCUM = 8, 64, 3


@pytest.fixture
def draws(monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    """Every seeded generator the data path asks for, by its coordinates (seed, purpose, ...)."""
    seen: list[tuple] = []
    for module, name in ((sampler_module, "derive_seed"), (batches_module, "generator")):
        real = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *c, real=real: seen.append(c) or real(*c))
    return seen


def test_sampler_seeks_to_a_far_step_computing_only_its_own_windows(shakespeare, draws, monkeypatch) -> None:
    sampler = WindowSampler(shakespeare.train, SEQ_LEN + 1, StepLayout(BATCH, grad_accum=ACCUM), seed=1337)
    permuted = Counter()
    real_permute = FeistelPermutation.__call__
    monkeypatch.setattr(FeistelPermutation, "__call__", lambda p, i: permuted.update([len(i)]) or real_permute(p, i))

    windows = sampler.windows(FAR, 2)
    first = sampler.sample_index(FAR, 2)
    epochs = {(first + i) // sampler.n_windows for i in range(BATCH)}
    assert {c[2] for c in draws if c[1] == "epoch"} == epochs  # only the epoch(s) holding this batch's samples
    assert len(draws) == 2 * len(epochs)  # each epoch's key and shift
    assert sum(n * k for n, k in permuted.items()) == BATCH  # only this batch's windows are permuted
    assert min(epochs) > 10**6  # far beyond epoch 0: nothing before it was touched
    assert windows.tokens.shape == (BATCH, SEQ_LEN + 1)

    # the same work as for step 10: the cost does not grow with the step
    draws.clear()
    WindowSampler(shakespeare.train, SEQ_LEN + 1, StepLayout(BATCH, grad_accum=ACCUM), seed=1337).windows(10, 2)
    assert len(draws) <= 2 * 2 and len(draws) >= 2


def test_step_batches_from_a_far_step_never_touch_an_earlier_one(shakespeare, draws, monkeypatch) -> None:
    objective = build_objective(SpanConfig(), shakespeare.tokenizer, SEQ_LEN, "auto")
    sampler = WindowSampler(shakespeare.train, objective.window_length, StepLayout(BATCH, grad_accum=ACCUM), seed=1337)
    asked = []
    real_windows = WindowSampler.windows
    monkeypatch.setattr(
        WindowSampler, "windows", lambda s, step, m=0: asked.append((step, m)) or real_windows(s, step, m)
    )

    batches = StepBatches(sampler, objective, start_step=FAR, max_steps=FAR + 5)
    assert len(batches) == 5
    first = next(iter(step_loader(batches, 0, torch.device("cpu"))))
    assert len(first) == ACCUM
    assert asked == [(FAR, m) for m in range(ACCUM)]
    objective_draws = [c for c in draws if c[1] == "objective"]
    assert objective_draws == [(1337, "objective", FAR, m, 0) for m in range(ACCUM)]

    # bit for bit what a run that had got there step by step would see for that step
    again = StepBatches(sampler, objective, start_step=FAR - 7, max_steps=FAR + 5)[7]
    for a, b in zip(first, again, strict=True):
        assert torch.equal(a.input_ids, b.input_ids) and torch.equal(a.labels, b.labels)


def test_clm_batches_depend_on_the_step_not_on_the_history(shakespeare) -> None:
    objective = build_objective(ClmConfig(), shakespeare.tokenizer, SEQ_LEN, "auto")
    fresh = WindowSampler(shakespeare.train, objective.window_length, StepLayout(BATCH), seed=1337)
    used = WindowSampler(shakespeare.train, objective.window_length, StepLayout(BATCH), seed=1337)
    for step in range(40):  # a sampler that has served earlier steps (its epoch cache warm)...
        used.windows(step)
    for step in (40, 41, 5000, FAR):  # ...and a fresh one agree on every later step
        assert torch.equal(fresh.windows(step).tokens, used.windows(step).tokens)
