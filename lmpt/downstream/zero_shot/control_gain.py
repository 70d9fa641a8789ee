"""A zero-shot task beside its untrained control (`downstream.control=scratch`, `lmpt-eval ... control=scratch`): the
same items scored the same way by the run's architecture freshly initialised (lmpt.downstream.control), and the
run's gain over it with a 95% interval paired over items (lmpt.downstream.gain). A zero-shot figure alone cannot say
what pre-training gave: an untrained model already prefers one sentence of a minimal pair by its tokens. On minimal
pairs the gain is also given on the pairs of equal token length, where the length preference any language model
learns first cannot help. The scoring of both lives with the zero-shot door (lmpt.downstream.kinds.zero_shot)."""

from __future__ import annotations

import numpy as np

from lmpt.downstream.figures import ACCURACY, EQUAL_LENGTH_ACCURACY, EQUAL_LENGTH_PAIRS, GAIN, SCRATCH
from lmpt.downstream.gain import paired_gain
from lmpt.downstream.significance import decode_outcomes, items_key


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


def render_control(result: dict) -> None:
    """The gain of the run's model over its untrained control, per figure, in plain sentences."""
    from lmpt.console import console
    from lmpt.downstream.gain import describe_gain

    names = {ACCURACY: "accuracy", EQUAL_LENGTH_ACCURACY: "accuracy on pairs of equal token length"}
    for figure, gain in result[GAIN].items():
        console.print(f"{describe_gain(names.get(figure, figure) + ':', gain)} (untrained {gain[SCRATCH]:.4f})")
