"""Batches for step k, made on demand: the data path is a function of (seed, step, micro_step, rank),
so a resumed run asks for step k directly and never replays earlier batches."""

from __future__ import annotations

import signal

import torch
from torch.utils.data import DataLoader, Dataset

from lmpt.batch import Batch, note_padding
from lmpt.data.sampler import StepSamples, ValidationWindows
from lmpt.objectives.base import Objective
from lmpt.rng import generator
from lmpt.train.preemption import SIGNALS


class StepBatches(Dataset):
    """Item i = the micro-batches of optimizer step `start_step + i`. The objective's draws are keyed by the
    sampler's seed and layout (rank, grad_accum), so windows and their corruption cannot disagree."""

    def __init__(self, sampler: StepSamples, objective: Objective, start_step: int, max_steps: int) -> None:
        self.sampler, self.objective = sampler, objective
        self.start_step, self.max_steps = start_step, max_steps

    def __len__(self) -> int:
        return max(0, self.max_steps - self.start_step)

    def __getitem__(self, i: int) -> list[Batch]:
        step = self.start_step + i
        return [self.micro_batch(step, m) for m in range(self.sampler.layout.grad_accum)]

    def micro_batch(self, step: int, micro_step: int) -> Batch:
        windows = self.sampler.windows(step, micro_step)
        draws = generator(self.sampler.seed, "objective", step, micro_step, self.sampler.layout.rank)
        batch = self.objective.batch_at(windows, draws, step)  # a function of the step (and the run's planned length)
        return note_padding(batch, self.objective.special.pad)


def _ignore_stop_signals(worker_id: int) -> None:
    """Workers leave the stop signals to the main process, which stops gracefully and then ends them."""
    for sig in SIGNALS:
        signal.signal(sig, signal.SIG_IGN)


def _as_is(item: list[Batch]) -> list[Batch]:
    return item


def step_loader(batches: StepBatches, num_workers: int, device: torch.device) -> DataLoader:
    """Workers build batches ahead of the loop; pinned memory lets the copy to a GPU overlap compute."""
    return DataLoader(
        batches,
        batch_size=None,
        shuffle=False,
        num_workers=num_workers,
        pin_memory=device.type == "cuda",
        collate_fn=_as_is,
        worker_init_fn=_ignore_stop_signals,
    )


def validation_batches(
    sets: dict[str, ValidationWindows], objective: Objective, seed: int, n_batches: int
) -> dict[str, list[Batch]]:
    """The same held-out batches at every evaluation, by source (any draws seeded by source and batch index), in the
    form the objective's measure says val_loss is of (lmpt.objectives.measure: fim's plain text, not rearranged)."""
    pad, measure = objective.special.pad, objective.measure
    return {
        name: [
            note_padding(
                measure.held_out_batch(windows.batch(i), generator(seed, "validation", *([name] if name else []), i)),
                pad,
            )
            for i in range(n_batches)
        ]
        for name, windows in sets.items()
    }


def yardstick_batches(sets: dict[str, ValidationWindows], objective: Objective, n_batches: int) -> list[Batch]:
    """The fixed batches of the objective's yardstick, with draws that depend on the source and batch index only
    (identical in every run): masked objectives' shared masking rate, a bound's passes, fim's rearranged text; empty
    for objectives without one (lmpt.objectives.measure)."""
    return objective.measure.yardstick_batches(sets, n_batches)
