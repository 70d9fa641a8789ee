"""The bag-of-words floor of a classification task: TF-IDF features of word unigrams and bigrams (scikit-learn's
TfidfVectorizer, sublinear term frequency) and a logistic regression on them, fit on the training split and scored on
dev (and test) as the fine-tuned models are. Fixed settings, no search: a cheap, deterministic line under which a
fine-tuned figure shows nothing a lexical classifier could not learn. Every word counts, one letter long or more;
training texts without a single word leave no feature, and the floor is then the majority class."""

from __future__ import annotations

import torch

from lmpt.downstream.finetuning.scores import classification_scores
from lmpt.downstream.tasks.task_files import Example

DESCRIPTION = "bag of words (tf-idf 1-2 grams + logistic regression)"


def texts_of(examples: list[Example]) -> list[str]:
    """Each example's text, a pair's two texts on either side of a line break (what the floors read)."""
    return [e.text if e.pair is None else f"{e.text} \n {e.pair}" for e in examples]


def bag_of_words_floor(
    examples: dict[str, list[Example]], classes: list[str], predictions: dict[str, list] | None = None
) -> dict:
    """Figures keyed as the fine-tuning's (accuracy, macro_f1, mcc; test_* for a test split) of the model fit on
    `examples["train"]` and scored on "dev" (and "test"); `predictions`, when given, receives each scored split's
    predicted class ids by prefix ("" dev, "test_" test)."""
    from sklearn.feature_extraction.text import TfidfVectorizer  # slow to import: only when a floor is asked for
    from sklearn.linear_model import LogisticRegression

    index = {label: i for i, label in enumerate(classes)}
    labels = [index[e.label] for e in examples["train"]]
    vectorizer = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, token_pattern=r"(?u)\b\w+\b")
    try:
        features = vectorizer.fit_transform(texts_of(examples["train"]))
    except ValueError:  # an empty vocabulary: no word in any training text
        majority = max(range(len(classes)), key=labels.count)
        predict = lambda texts: [majority] * len(texts)  # noqa: E731
    else:
        model = LogisticRegression(max_iter=1000).fit(features, labels)
        predict = lambda texts: model.predict(vectorizer.transform(texts))  # noqa: E731
    figures: dict = {"method": DESCRIPTION}
    for prefix, split in (("", "dev"), ("test_", "test")):
        if split in examples:
            gold = torch.tensor([index[e.label] for e in examples[split]])
            predicted = torch.as_tensor(predict(texts_of(examples[split])))
            if predictions is not None:
                predictions[prefix] = predicted.tolist()
            figures |= classification_scores(gold, predicted, len(classes), prefix)
    return figures
