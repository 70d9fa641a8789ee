"""A zero-shot task beside its untrained control (`downstream.control=scratch`, `lmpt-eval ... control=scratch`): the
same items scored the same way by the run's architecture freshly initialised (lmpt.downstream.control), and the
run's gain over it with a 95% interval paired over items (lmpt.downstream.gain). A zero-shot figure alone cannot say
what pre-training gave: an untrained model already prefers one sentence of a minimal pair by its tokens. On minimal
pairs the gain is also given on the pairs of equal token length, where the length preference any language model
learns first cannot help."""

from __future__ import annotations

import dataclasses

import numpy as np

from lmpt.downstream.control import scratch_twin
from lmpt.downstream.figures import ACCURACY, EQUAL_LENGTH_ACCURACY, GAIN, SCRATCH
from lmpt.downstream.gain import paired_gain
from lmpt.downstream.minimal_pairs import EQUAL_LENGTH_PAIRS
from lmpt.downstream.significance import decode_outcomes, items_key
from lmpt.downstream.zero_shot import ZeroShotTask, evaluate_zero_shot
from lmpt.rundir.trained import Trained


def figure_gain(correct: np.ndarray, control: np.ndarray) -> dict:
    """The gain of `correct` over `control` ([seeds, items] booleans) with its paired interval, beside both means."""
    return {"pretrained": float(np.mean(correct)), SCRATCH: float(np.mean(control)), **paired_gain(correct, control)}


def zero_shot_gains(result: dict, control: dict) -> dict[str, dict]:
    """By figure, the gain of a run's zero-shot `result` over its `control`'s on the same items: accuracy, and on
    minimal pairs accuracy on the pairs of equal token length (when there are any)."""
    correct, scratch = decode_outcomes(result[items_key(ACCURACY)]), decode_outcomes(control[items_key(ACCURACY)])
    assert correct is not None and scratch is not None and correct.shape == scratch.shape
    gains = {ACCURACY: figure_gain(correct[None], scratch[None])}
    equal = decode_outcomes(result.get(EQUAL_LENGTH_PAIRS))
    if equal is not None and equal.any():
        gains[EQUAL_LENGTH_ACCURACY] = figure_gain(correct[None, equal], scratch[None, equal])
    return gains


def score_zero_shot(
    trained: Trained, task: ZeroShotTask, batch_size: int, hidden: bool, control: str, within_word: bool = False,
    choice_pll: str = "conditional",
) -> dict:  # fmt: skip
    """The task scored on `trained` (lmpt.downstream.zero_shot.evaluate_zero_shot) and, with `control` scratch, on
    its untrained control the same way: then the control's figures (`scratch`: its accuracy and per-item outcomes)
    and the gains over it (`gain`) join the result."""
    result = evaluate_zero_shot(trained, task, batch_size, hidden, within_word, choice_pll)
    if control != SCRATCH:
        return result
    named = dataclasses.replace(task, name=f"{task.name} (scratch control)")
    control = evaluate_zero_shot(scratch_twin(trained), named, batch_size, hidden, within_word, choice_pll)
    kept = {k: control[k] for k in (ACCURACY, EQUAL_LENGTH_ACCURACY, items_key(ACCURACY)) if k in control}
    init_seed = int(trained.config.trainer.seed)
    return {**result, "control": SCRATCH, SCRATCH: {"init_seed": init_seed, **kept},
            GAIN: zero_shot_gains(result, control)}  # fmt: skip
