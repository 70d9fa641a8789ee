"""What a run's held-out figures call for saying while it trains, each said once: held-out loss worse than a uniform
guess over the vocabulary (the model predicts unseen text worse than knowing nothing of it), and held-out loss rising
while training loss falls (the model memorises its training text: a small corpus over many epochs). The figure is the
objective's own held-out nats per token (Measure.held_out_nats: its token loss, or a bound's yardstick), the one
val_bpb converts; a uniform guess over V pieces costs ln V of them."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

RISE = 0.03
"""How far above its best held-out loss a later one must be to count as rising (3%: an evaluation's noise stays
below)."""


@dataclass
class HeldOutWatch:
    vocab_size: int
    epochs_per_step: float | None = None
    """Epochs of the training text one step makes (None: not known), to say how often the text was seen."""
    best: tuple[int, float, float | None] | None = None
    """(step, held-out nats, training loss then) of the lowest held-out loss so far."""
    said: set[str] = field(default_factory=set)

    @property
    def uniform_nats(self) -> float:
        return math.log(self.vocab_size)

    def consider(self, step: int, nats: float | None, train_loss: float | None) -> list[str]:
        """The warnings the evaluation at `step` calls for (each kind once a run)."""
        if nats is None or not math.isfinite(nats):
            return []
        said = []
        if nats > self.uniform_nats and "uniform" not in self.said:
            said.append(
                f"held-out loss {nats:.3f} at step {step} is worse than a uniform guess over the {self.vocab_size:,} "
                f"pieces ({self.uniform_nats:.3f}): the model predicts unseen text worse than knowing nothing of it"
                f"{self._seen(step)}; give it more text (docs/data.md), or fewer steps"
            )
            self.said.add("uniform")
        if self.best is None or nats < self.best[1]:
            self.best = (step, nats, train_loss)
        else:
            at, low, low_train = self.best
            falling = train_loss is not None and low_train is not None and train_loss < low_train
            if nats > low * (1 + RISE) and falling and "rising" not in self.said:
                said.append(
                    f"held-out loss rose from {low:.3f} at step {at} to {nats:.3f} at step {step} while training loss "
                    f"fell from {low_train:.3f} to {train_loss:.3f}: the model memorises its training text"
                    f"{self._seen(step)}; RUN/best keeps the best weights (trainer.keep_best), and more text or fewer "
                    "steps train a model that generalises"
                )
                self.said.add("rising")
        return said

    def _seen(self, step: int) -> str:
        if self.epochs_per_step is None:
            return ""
        return f" (it has seen its text {self.epochs_per_step * step:,.0f} times)"
