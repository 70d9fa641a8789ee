"""The training sampler and the validation windows of prepared data: the whole corpus when the run has one
source, a weighted mixture and one validation set per source when it has several."""

from __future__ import annotations

from dataclasses import replace

from lmpt.data.cache import PreparedData
from lmpt.data.mixture import MixtureSampler
from lmpt.data.sampler import StepLayout, StepSamples, ValidationWindows, WindowSampler
from lmpt.errors import LmptError


def hold_unique_tokens(data: PreparedData, unique_tokens: int | None) -> PreparedData:
    """`data` whose training text is its first `unique_tokens` tokens (data.unique_tokens; None: all of it): the
    same tokens whatever the objective or seed. More than the training text, or a mixture, is refused in one line
    (what only the tokenised text can tell; the value itself is checked with the config)."""
    if unique_tokens is None:
        return data  # a value below 1 never gets here: lmpt.config.validate refuses it with the rest of the config
    if len(data.sources) > 1:
        raise LmptError(
            f"data.unique_tokens={unique_tokens:,} takes the first tokens of one training text; this run mixes "
            f"{len(data.sources)} sources: drop data.unique_tokens or train on one source"
        )
    (source,) = data.sources
    first, end = source.train
    if unique_tokens > end - first:
        raise LmptError(
            f"data.unique_tokens={unique_tokens:,} is more than the {end - first:,} tokens of the training text: "
            "lower it or add text"
        )
    return replace(data, sources=[replace(source, train=(first, first + unique_tokens))])


def training_sampler(data: PreparedData, window_length: int, layout: StepLayout, seed: int) -> StepSamples:
    """The windows of every (step, micro_step, rank): a pure function of them, in O(1) memory."""
    if len(data.sources) == 1:
        return WindowSampler(data.train, window_length, layout, seed, span=data.sources[0].train)
    return MixtureSampler(
        data.train,
        [s.train for s in data.sources],
        [s.weight for s in data.sources],
        [s.name for s in data.sources],
        window_length,
        layout,
        seed,
    )


def validation_sets(
    data: PreparedData, window_length: int, batch_size: int, n_batches: int
) -> dict[str, ValidationWindows]:
    """The fixed held-out windows by source name ("" alone when the run has one source): `n_batches` each."""
    if len(data.sources) == 1:
        return {"": ValidationWindows(data.val, window_length, batch_size, n_batches)}
    return {
        s.name: ValidationWindows(
            data.val, window_length, batch_size, n_batches, span=s.val, what=f"validation text of source '{s.name}'"
        )
        for s in data.sources
    }
