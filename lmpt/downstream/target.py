"""What a fine-tuned task predicts (`Target`): the head's outputs, its loss, its predictions, its figures, the per-item
outcomes a paired gain resamples, its floor and its trivial baseline. Classification's (`CLASSES`: one logit a class,
cross-entropy, accuracy) is here; a task kind that predicts something else (lmpt.downstream.kinds.regression) brings
its own subclass, so fine-tuning never asks which kind it serves."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, ClassVar

import torch
import torch.nn.functional as F

from lmpt.downstream.figures import ACCURACY, MAJORITY_ACCURACY, classification_scores
from lmpt.downstream.floors import bag_of_words_floor

if TYPE_CHECKING:
    from lmpt.downstream.labelled_files import Example


class Target:
    """What a fine-tuned task predicts; subclasses answer each method. A target is stateless: the task's classes
    (empty for a task predicting numbers) come with every call that needs them."""

    numeric_labels: ClassVar[bool] = False
    """Whether the labels are read as numbers (each checked where it is read) rather than as class names."""
    headline: ClassVar[str] = ACCURACY
    """The figure the recipe search picks by (higher is better) and the table leads with."""
    gain_figure: ClassVar[str] = ACCURACY
    """The figure the gain over the untrained control is of (`gain.FIGURE`, lmpt.downstream.significance)."""
    floor_method: ClassVar[str] = "tf-idf + logistic regression"

    def outputs(self, classes: list[str]) -> int:
        """The head's width."""
        return len(classes)

    def labels(self, examples: list[Example], classes: list[str]) -> torch.Tensor:
        """The training target of each example, as the loss reads it."""
        index = {label: i for i, label in enumerate(classes)}
        return torch.tensor([index[e.label] for e in examples])

    def loss(self, outputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """The loss of float32 head outputs [B, outputs] against `labels`."""
        return F.cross_entropy(outputs, labels)

    def predict(self, outputs: torch.Tensor) -> torch.Tensor:
        """The prediction of each example from its head outputs."""
        return outputs.argmax(dim=-1)

    def scores(self, gold: torch.Tensor, predicted: torch.Tensor, classes: list[str], prefix: str = "") -> dict:
        """The figures of `predicted` against `gold`, keyed `prefix + name`."""
        return classification_scores(gold, predicted, len(classes), prefix)

    def outcomes(self, gold: torch.Tensor, predicted: torch.Tensor) -> torch.Tensor:
        """Per item, how well it was predicted, higher better (the paired gain resamples their difference)."""
        return predicted == gold

    def floor(
        self, examples: dict[str, list[Example]], classes: list[str], predictions: dict[str, list] | None = None
    ) -> dict:
        """The bag-of-words floor's figures on dev (and test), keyed as the fine-tuning's; `predictions`, when
        given, receives its predictions by split prefix ("" dev, "test_" test)."""
        return bag_of_words_floor(examples, classes, predictions)

    def baseline(self, examples: dict[str, list[Example]], dev_labels: torch.Tensor, classes: list[str]) -> dict:
        """The trivial baseline's figures on dev: answering the training split's most common class."""
        majority = Counter(e.label for e in examples["train"]).most_common(1)[0][0]
        return {MAJORITY_ACCURACY: float((dev_labels == classes.index(majority)).float().mean())}

    def as_written(self, prediction: float, classes: list[str]) -> str:
        """A prediction as the task's files write a label."""
        return classes[int(prediction)]


CLASSES = Target()
"""Classification's target: one logit a class, cross-entropy, accuracy."""
