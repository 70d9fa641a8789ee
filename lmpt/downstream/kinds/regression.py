"""Regression, a fine-tuned kind (STS-B's): each example's label is a number to predict. A folder of SPLIT.jsonl files
named `regression:FOLDER` in downstream.tasks (or `lmpt-finetune RUN regression=true data.train=...`),
or a GLUE task scored by a correlation. Its head has one output trained by mean squared error; its figures are
Pearson and Spearman correlation (scipy.stats) and the MSE; its floor is a ridge regression on the same TF-IDF
features as classification's bag of words; the gain over the untrained control is the drop in squared error, paired
over (seed, item) as classification's gain in accuracy is. A label that does not read as a number is refused naming
its file and line (lmpt.downstream.labelled_files)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from lmpt.downstream.bundled import task_folder
from lmpt.downstream.figures import (
    MEAN_BASELINE_MSE,
    METRICS,
    MSE,
    PEARSON,
    PEARSON_MEAN,
    REGRESSION_CONTROL_FIGURES,
    REGRESSION_FIGURES,
    SPEARMAN,
)
from lmpt.downstream.glue import entry_is_regression
from lmpt.downstream.kinds.fine_tuned import FineTunedTask, Found
from lmpt.downstream.kinds.fine_tuned_result import FineTunedResult

if TYPE_CHECKING:
    import torch

    from lmpt.downstream.labelled_files import Example
    from lmpt.downstream.target import Target

PREFIX = "regression:"
"""downstream.classification_tasks=[regression:FOLDER]: a folder of SPLIT.jsonl whose labels are numbers."""
FLOOR_METHOD = "bag of words (tf-idf 1-2 grams + ridge regression)"


def regression_scores(gold: np.ndarray, predicted: np.ndarray, prefix: str = "") -> dict[str, float]:
    """Pearson, Spearman and mean squared error (lmpt.downstream.figures), keyed `prefix + name`."""
    return {prefix + name: METRICS[name](gold, predicted) for name in (PEARSON, SPEARMAN, MSE)}


def _numbers(examples: list[Example]) -> np.ndarray:
    return np.array([float(e.label) for e in examples], dtype=np.float64)


def ridge_floor(examples: dict[str, list[Example]], predictions: dict[str, list] | None = None) -> dict:
    """The floor's figures keyed as the fine-tuning's (pearson, spearman, mse; test_* for a test split): a ridge
    regression (scikit-learn, alpha 1) on tf-idf 1-2 grams fit on "train"; no word in any training text: the
    training mean. `predictions`, when given, receives each scored split's predictions by prefix."""
    from sklearn.linear_model import Ridge

    from lmpt.downstream.floors import lexical_floor, texts_of

    train = _numbers(examples["train"])
    predict = lexical_floor(texts_of(examples["train"]), train, Ridge(alpha=1.0), float(train.mean()))
    figures: dict = {"method": FLOOR_METHOD}
    for prefix, split in (("", "dev"), ("test_", "test")):
        if split in examples:
            predicted = np.asarray(predict(texts_of(examples[split])), dtype=np.float64)
            figures |= regression_scores(_numbers(examples[split]), predicted, prefix)
            if predictions is not None:
                predictions[prefix] = predicted.tolist()
    return figures


@functools.cache
def _number_target() -> Target:
    """The regression target, built on first use (it subclasses the torch-importing Target)."""
    import torch.nn.functional as F

    from lmpt.downstream.target import Target

    class Numbers(Target):
        """One output, mean squared error, correlations."""

        numeric_labels: ClassVar[bool] = True
        headline: ClassVar[str] = PEARSON
        gain_figure: ClassVar[str] = MSE

        def outputs(self, classes: list[str]) -> int:
            return 1

        def labels(self, examples: list[Example], classes: list[str]) -> torch.Tensor:
            import torch

            return torch.tensor(_numbers(examples), dtype=torch.float32)

        def loss(self, outputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
            return F.mse_loss(outputs.squeeze(-1), labels.float())

        def predict(self, outputs: torch.Tensor) -> torch.Tensor:
            return outputs.squeeze(-1).float()

        def scores(self, gold: torch.Tensor, predicted: torch.Tensor, classes: list[str], prefix: str = "") -> dict:
            return regression_scores(gold.numpy(), predicted.numpy(), prefix)

        def outcomes(self, gold: torch.Tensor, predicted: torch.Tensor) -> torch.Tensor:
            return -((predicted.double() - gold.double()) ** 2)  # higher better: the gain is the drop in MSE

        def floor(
            self, examples: dict[str, list[Example]], classes: list[str], predictions: dict[str, list] | None = None
        ) -> dict:
            return ridge_floor(examples, predictions)

        def baseline(self, examples: dict[str, list[Example]], dev_labels: torch.Tensor, classes: list[str]) -> dict:
            mean = _numbers(examples["train"]).mean()
            return {MEAN_BASELINE_MSE: float(np.mean((dev_labels.double().numpy() - mean) ** 2))}

        def as_written(self, prediction: float, classes: list[str]) -> str:
            return f"{prediction:.3f}"

    return Numbers()


@dataclass(frozen=True)
class RegressionResult(FineTunedResult):
    kind: ClassVar[str] = "regression"
    logged_figures: ClassVar[tuple[str, ...]] = REGRESSION_FIGURES
    control_figures: ClassVar[tuple[str, str, str]] = REGRESSION_CONTROL_FIGURES
    headline_figure: ClassVar[str] = PEARSON
    gain_figure: ClassVar[str] = MSE  # the gain is the drop in squared error
    record_precedence: ClassVar[int] = -1  # its record holds per_seed, as classification's does: asked first

    @classmethod
    def wrote(cls, raw: dict[str, Any]) -> bool:
        return PEARSON_MEAN in raw  # what only a regression's fine-tuning reports


@dataclass(frozen=True, kw_only=True)
class Regression(FineTunedTask):
    kind: ClassVar[str] = "regression"
    listing_order: ClassVar[int] = 3
    result_type: ClassVar[type[FineTunedResult]] = RegressionResult
    numbers: ClassVar[bool] = True

    @classmethod
    def target(cls) -> Target:
        """One output trained by mean squared error; Pearson picks the recipe."""
        return _number_target()

    @classmethod
    def claims(cls, spec: str) -> bool:
        return spec.startswith(PREFIX) or entry_is_regression(spec)  # regression:FOLDER, or glue:sts-b@DIR

    @classmethod
    def find_files(cls, spec: str, key: str) -> Found:
        """regression:FOLDER, a folder holding train.jsonl and dev.jsonl (test.jsonl optional), named as the
        folder; its labels are numbers."""
        return Found.files(*task_folder(spec.removeprefix(PREFIX), key))
