"""The training sampler and the validation windows of prepared data: the whole corpus when the run has one
source, a weighted mixture and one validation set per source when it has several."""

from __future__ import annotations

from lmpt.data.cache import PreparedData
from lmpt.data.mixture import MixtureSampler
from lmpt.data.sampler import StepSamples, ValidationWindows, WindowSampler


def training_sampler(
    data: PreparedData,
    window_length: int,
    batch_size: int,
    seed: int,
    rank: int = 0,
    world_size: int = 1,
    grad_accum: int = 1,
) -> StepSamples:
    """The windows of every (step, micro_step, rank): a pure function of them, in O(1) memory."""
    if len(data.sources) == 1:
        return WindowSampler(data.train, window_length, batch_size, seed, rank, world_size, grad_accum)
    return MixtureSampler(
        data.train, [s.train for s in data.sources], [s.weight for s in data.sources],
        [s.name for s in data.sources], window_length, batch_size, seed, rank, world_size, grad_accum,
    )  # fmt: skip


def validation_sets(
    data: PreparedData, window_length: int, batch_size: int, n_batches: int
) -> dict[str, ValidationWindows]:
    """The fixed held-out windows by source name ("" alone when the run has one source): `n_batches` each."""
    if len(data.sources) == 1:
        return {"": ValidationWindows(data.val, window_length, batch_size, n_batches)}
    return {
        s.name: ValidationWindows(data.val, window_length, batch_size, n_batches, span=s.val,
                                  what=f"validation text of source '{s.name}'")
        for s in data.sources
    }  # fmt: skip
