"""What fim's training inputs hold, measured from the text a run trains on: the mean length of the text's documents in
tokens, and the share of the input positions that are FIM sentinels in the very batches a fim run trains on.

Why here and not in the run's log: lmpt's batches are a pure function of (seed, step) (lmpt.train.batches), so the
batches built in process from a run's own keys, over the token cache the run used, are the run's batches bit for bit.
Counting them after the grid needs no metric added to every fim run's training loop, and reads the text through the
same code (token cache, sampler, objective) the run did."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from lmpt.config.schema import DataConfig, TokenizerConfig, settings
from lmpt.data.cache import default_cache_root, prepare_corpora
from lmpt.data.sampler import StepLayout
from lmpt.data.sampling import hold_unique_tokens, training_sampler
from lmpt.errors import LmptError
from lmpt.objectives.fim import FillInTheMiddle
from lmpt.objectives.registry import build_objective
from lmpt.prepare.step import composed_run
from lmpt.train.batches import StepBatches


@dataclass(frozen=True)
class FimInputs:
    """A text as fim's training reads it."""

    documents: int
    """Documents of the training text."""
    tokens: int
    """Tokens of the training text (each document's eos included)."""
    sentinels: int
    """Sentinel tokens (<fim_prefix>, <fim_suffix>, <fim_middle>) among the input positions counted."""
    positions: int
    """Input positions counted (padding aside): every position of `steps` training batches."""
    steps: int
    """The optimizer steps whose batches were counted (the run's first)."""

    @property
    def mean_document(self) -> float:
        """Mean document length in tokens (its eos aside)."""
        return (self.tokens - self.documents) / self.documents

    @property
    def sentinel_share(self) -> float:
        """The share of fim's input positions that hold a sentinel: text clm reads and fim does not."""
        return self.sentinels / self.positions


def measure_inputs(keys: Sequence[str], steps: int) -> FimInputs:
    """The text of the run `lmpt KEYS` (a fim run) and the sentinels of its first `steps` training batches (at most its
    trainer.max_steps), built in process exactly as the run builds them: from its token cache (made here if missing),
    its sampler and seed, and its objective's draws. One LmptError line for a run that is not fim."""
    cfg = composed_run(keys)
    data_cfg = settings(cfg.data, DataConfig)
    data = prepare_corpora(
        data_cfg, settings(cfg.tokenizer, TokenizerConfig), Path.cwd(), default_cache_root(data_cfg.cache_dir)
    )
    data = hold_unique_tokens(data, data_cfg.unique_tokens)
    objective = build_objective(cfg.objective, data.tokenizer, data_cfg.seq_len, cfg.model.arch)
    if not isinstance(objective, FillInTheMiddle):
        raise LmptError(f"objective={cfg.objective.name} has no FIM sentinels to count: give a fim run's keys")
    trainer = cfg.trainer
    objective.plan_run(int(trainer.max_steps))
    layout = StepLayout(int(trainer.batch_size), grad_accum=int(trainer.grad_accum))
    sampler = training_sampler(data, objective.window_length, layout, int(trainer.seed))
    counted = max(1, min(steps, int(trainer.max_steps)))
    batches = StepBatches(sampler, objective, 0, counted)
    sentinels, positions = 0, 0
    ids = torch.tensor(objective.sentinels)
    for step in range(counted):
        for batch in batches[step]:
            inputs = batch.input_ids
            sentinels += int(torch.isin(inputs, ids).sum())
            positions += int((inputs != objective.special.pad).sum())
    lengths = np.diff(np.asarray(data.train.doc_offsets))
    starts = np.asarray(data.train.doc_offsets[:-1])
    trained = np.zeros(starts.shape, dtype=bool)
    for first, end in (s.train for s in data.sources):  # the training text the sampler reads (data.unique_tokens')
        trained |= (starts >= first) & (starts < end)
    inside = lengths[trained]
    return FimInputs(int(inside.size), int(inside.sum()), sentinels, positions, counted)
