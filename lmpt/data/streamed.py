"""A streamed dataset's (data=hf) two limits, applied before the quality stage and the token cache: a tokenizer
trained for it reads the head of the training text only (its first tokenizer.max_sentences sentences: the same
sentences a sample of a smaller corpus keeps, and a Hub dataset is never read to its end just to train one), and
data.max_tokens then counts the stream's tokens with that tokenizer and stops taking documents at the cap."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

from lmpt.config.schema import TokenizerConfig
from lmpt.console import info
from lmpt.data.split import Documents, Items, train_only
from lmpt.tokenizer.base import Tokenizer
from lmpt.tokenizer.train import prepare_tokenizer

_COUNT_DOCS = 256  # documents whose tokens are counted in one encode_batch call


def head_sentences(documents: Documents, limit: int) -> Documents:
    """The documents of `documents` up to its first `limit` sentences (the last one cut short), re-iterable."""

    def head() -> Iterator[list[str]]:
        left = limit
        for doc in documents():
            if left <= 0:
                return
            yield doc[:left]
            left -= len(doc)

    return head


def cap_tokens(items: Items, tokenizer: Tokenizer, max_tokens: int) -> Items:
    """The items of `items`, in order, while the tokens they hold (each document's, plus its eos, as the token
    cache stores them) stay within `max_tokens`: the first document that would pass the cap ends the stream."""
    told: list[bool] = []

    def capped() -> Iterator[tuple[str, list[str]]]:
        taken, docs, stream = 0, 0, items()
        while chunk := list(itertools.islice(stream, _COUNT_DOCS)):
            lengths = iter(len(ids) for ids in tokenizer.encode_batch([s for _, doc in chunk for s in doc]))
            for split, doc in chunk:
                n = sum(next(lengths) for _ in doc) + 1
                if taken + n > max_tokens:
                    if not told:  # once a process: the stream is walked again by each later stage
                        told.append(True)
                        info(f"data.max_tokens={max_tokens:,}: took {taken:,} tokens ({docs:,} documents) of it")
                    return
                taken, docs = taken + n, docs + 1
                yield split, doc

    return capped


def streamed_inputs(
    items: list[Items],
    tokenizer_cfg: TokenizerConfig,
    tokenizer: Tokenizer | None,
    max_tokens: int | None,
    fingerprint: str,
    cache_root: Path,
) -> tuple[Tokenizer, list[Items]]:
    """(tokenizer, items) of a streamed dataset: the given tokenizer, or the one trained (or cached) on the head of
    the stream's training text, and the items capped at `max_tokens` of its tokens (None: not capped)."""
    if tokenizer is None:
        head = head_sentences(train_only(items), tokenizer_cfg.max_sentences)
        tokenizer = prepare_tokenizer(tokenizer_cfg, head, fingerprint, cache_root)
    if max_tokens is not None:
        items = [cap_tokens(source, tokenizer, max_tokens) for source in items]
    return tokenizer, items
