"""The lexical floors of the fine-tuned tasks, one scikit-learn pipeline for every kind (`lexical_floor`): TF-IDF
features of word unigrams and bigrams (TfidfVectorizer, sublinear term frequency) and the kind's estimator on them
(a logistic regression for classification's bag of words here, a ridge regression for regression's), fit on the
training split and scored on dev (and test) as the fine-tuned models are. Fixed settings, no search: a cheap,
deterministic line under which a fine-tuned figure shows nothing a lexical model could not learn. Every word counts,
one letter long or more; training texts without a single word leave no feature, and the floor is then the kind's
constant guess (the majority class, the training mean)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import torch

from lmpt.downstream.figures import classification_scores

if TYPE_CHECKING:
    from numpy.typing import ArrayLike
    from sklearn.base import BaseEstimator

    from lmpt.downstream.labelled_files import Example

DESCRIPTION = "bag of words (tf-idf 1-2 grams + logistic regression)"
WORDS = r"(?u)\b\w+\b"
"""A word: one letter long or more (scikit-learn's default drops one-letter words)."""

Predictor = Callable[[list[str]], Sequence]
"""The floor's predictions for texts."""


def texts_of(examples: list[Example]) -> list[str]:
    """Each example's text, a pair's two texts on either side of a line break (what the floors read)."""
    return [e.text if e.pair is None else f"{e.text} \n {e.pair}" for e in examples]


def lexical_floor(train: list[str], targets: ArrayLike, estimator: BaseEstimator, constant: object) -> Predictor:
    """TF-IDF 1-2 grams of `train` and `estimator` fit on them to `targets`, as one pipeline; `constant` for every
    text when no training text holds a word (the vectorizer finds no vocabulary)."""
    from sklearn.feature_extraction.text import TfidfVectorizer  # slow to import: only when a floor is asked for
    from sklearn.pipeline import make_pipeline

    pipeline = make_pipeline(TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, token_pattern=WORDS), estimator)
    try:
        return pipeline.fit(train, targets).predict
    except ValueError:
        if hasattr(pipeline[0], "vocabulary_"):  # the vectorizer fit: the estimator's own error
            raise
        return lambda texts: [constant] * len(texts)  # an empty vocabulary: no word in any training text


def bag_of_words_floor(
    examples: dict[str, list[Example]], classes: list[str], predictions: dict[str, list] | None = None
) -> dict:
    """Figures keyed as the fine-tuning's (accuracy, macro_f1, mcc; test_* for a test split) of the model fit on
    `examples["train"]` and scored on "dev" (and "test"); `predictions`, when given, receives each scored split's
    predicted class ids by prefix ("" dev, "test_" test)."""
    from sklearn.linear_model import LogisticRegression

    index = {label: i for i, label in enumerate(classes)}
    labels = [index[e.label] for e in examples["train"]]
    majority = max(range(len(classes)), key=labels.count)
    predict = lexical_floor(texts_of(examples["train"]), labels, LogisticRegression(max_iter=1000), majority)
    figures: dict = {"method": DESCRIPTION}
    for prefix, split in (("", "dev"), ("test_", "test")):
        if split in examples:
            gold = torch.tensor([index[e.label] for e in examples[split]])
            predicted = torch.as_tensor(predict(texts_of(examples[split])))
            if predictions is not None:
                predictions[prefix] = predicted.tolist()
            figures |= classification_scores(gold, predicted, len(classes), prefix)
    return figures
