"""The untrained control of a fine-tuning or a zero-shot task (`control=scratch`): the run's architecture at the
run's size, freshly initialised by the run's objective (`Objective.build_model` from the run's config, seeded from
trainer.seed as the run itself was, lmpt.train.inputs.fresh_model), so a figure can be set beside what the same
recipe makes of no pre-training at all. With a few thousand labelled sentences fine-tuning can learn a lexical
classifier from scratch, and an untrained model prefers one sentence of a minimal pair by its tokens alone: only the
gap over this control says what pre-training gave."""

from __future__ import annotations

import dataclasses

from lmpt.errors import LmptError
from lmpt.model import LanguageModel, build_model
from lmpt.model.mtp import without_mtp_modules
from lmpt.objectives.registry import build_objective
from lmpt.rundir.trained import Trained
from lmpt.train.inputs import fresh_model


def scratch_model(trained: Trained, seed: int | None = None) -> LanguageModel:
    """The model `trained` would be before any training: its objective's `build_model` on the run's config, drawn
    from `seed` (None = the run's trainer.seed), kept as inference keeps a run (electra's discriminator, no
    multi-token modules), in eval mode on the device of `trained.model`."""
    config, cls = trained.config, trained.objective
    seed = int(config.trainer.seed) if seed is None else seed
    objective = build_objective(config.objective, trained.tokenizer, int(config.data.seq_len), str(config.model.arch))
    fresh, vocab = fresh_model(objective, config.model, trained.tokenizer, seed)
    if vocab != trained.model.vocab_size:
        raise LmptError(
            f"control=scratch: the run's tokenizer gives a {vocab}-row vocabulary but {trained.weights} has "
            f"{trained.model.vocab_size}: the run's files disagree; use control=none"
        )
    state = without_mtp_modules(cls.inference_state(fresh.state_dict()))
    model = build_model(
        config.model, trained.arch, vocab, trained.tokenizer.special.pad, cls.n_segments, cls.n_sequence_classes
    )
    model.load_state_dict(state, strict=True)
    return model.to(trained.model.head_weight.device).eval()


def scratch_twin(trained: Trained) -> Trained:
    """`trained` with its model swapped for `scratch_model(trained)`: what a zero-shot task scores as the control."""
    return dataclasses.replace(trained, model=scratch_model(trained))
