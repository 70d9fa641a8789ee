"""Hold out validation text from a stream: evenly spaced documents (or sentences) without knowing n."""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Iterator

from lmpt.data.mixture import Source
from lmpt.data.sources import iter_documents
from lmpt.errors import LmptError, SmallTextError

Documents = Callable[[], Iterator[list[str]]]
Items = Callable[[], Iterator[tuple[str, list[str]]]]


def is_held_out(i: int, fraction: float) -> bool:
    """True when item i goes to validation: floor((i+1)f) > floor(i f) spaces them evenly."""
    return math.floor((i + 1) * fraction) > math.floor(i * fraction)


def first_held_out(fraction: float) -> int:
    """Index of the first held-out item; a stream with no more items than this holds none out."""
    i = 0
    while not is_held_out(i, fraction):
        i += 1
    return i


def _has_more_than(items: Iterator[object], n: int) -> bool:
    for count, _ in enumerate(items, start=1):
        if count > n:
            return True
    return False


def choose_unit(documents: Documents, fraction: float) -> str:
    """ "documents" when holding out whole documents leaves validation non-empty, else "sentences";
    refuses an empty corpus and one too small to hold anything out."""
    if not 0.0 < fraction < 1.0:
        raise LmptError(
            f"data.val_fraction={fraction} must be between 0 and 1 (exclusive): fix it or set data.val_paths"
        )
    if not _has_more_than(documents(), 0):
        raise LmptError("the training text is empty (no non-blank line in data.paths): add text")
    needed = first_held_out(fraction)
    if _has_more_than(documents(), needed):
        return "documents"
    if _has_more_than((s for doc in documents() for s in doc), needed):
        return "sentences"
    raise SmallTextError(
        f"the training text has too few sentences to hold out data.val_fraction={fraction}: "
        "add text, raise data.val_fraction or set data.val_paths"
    )


def split_stream(documents: Documents, fraction: float, unit: str) -> Iterator[tuple[str, list[str]]]:
    """("train" | "val", document) in corpus order. With unit "sentences", held-out sentences become
    one-sentence validation documents and the rest of their document stays in training."""
    if unit == "documents":
        for i, doc in enumerate(documents()):
            yield ("val" if is_held_out(i, fraction) else "train"), doc
        return
    j = 0
    for doc in documents():
        kept: list[str] = []
        for sentence in doc:
            if is_held_out(j, fraction):
                yield "val", [sentence]
            else:
                kept.append(sentence)
            j += 1
        if kept:
            yield "train", kept


def train_only(sources: list[Items]) -> Documents:
    """The training documents of every source's split stream, in order, as a re-iterable source (the
    tokenizer's input)."""

    def documents() -> Iterator[list[str]]:
        return (doc for items in sources for split, doc in items() if split == "train")

    return documents


def source_items(source: Source, text_field: str, val_fraction: float) -> Items:
    """A re-iterable stream of ("train" | "val", document) of one source in a fixed order: its val_paths, or
    an evenly spaced `val_fraction` held out. The checks that read text run on the first call only: a launch
    that finds its tokenizer and cache never makes one."""
    plan = functools.cache(lambda: _split_plan(source, text_field, val_fraction))
    return lambda: plan()()


def _split_plan(source: Source, text_field: str, val_fraction: float) -> Items:
    of, paths, val_paths = (
        (f" of source '{source.name}'", "its paths", "its val_paths")
        if source.name
        else ("", "data.paths", "data.val_paths")
    )
    train_docs = lambda: iter_documents(source.train_paths, source.documents, text_field)
    if (dataset := source.dataset) is not None:
        from lmpt.data.readers.hf import dataset_documents

        train_docs = lambda: dataset_documents(dataset, text_field)
    if source.val_paths:
        val_docs = lambda: iter_documents(source.val_paths, source.documents, text_field)
        if next(train_docs(), None) is None:
            raise LmptError(f"the training text{of} is empty (no non-blank line in {paths}): add text")
        if next(val_docs(), None) is None:
            raise LmptError(f"the validation text{of} is empty (no non-blank line in {val_paths}): add text")
        return lambda: itertools.chain((("train", d) for d in train_docs()), (("val", d) for d in val_docs()))
    unit = choose_unit(train_docs, val_fraction)
    return lambda: split_stream(train_docs, val_fraction, unit)
