"""Every problem a small text meets, said at once with keys that train on it (issue 63, point 17).

A text of a few paragraphs meets three refusals, each found at its own stage of a launch: too few sentences to hold
out data.val_fraction (the split), a vocabulary larger than the text supports (the tokenizer), fewer tokens than one
window (the windows). A user fixing them one launch at a time needed three tries. When any of them stops a run (a
SmallTextError), the text is read again whole (a small text is cheap to read; one over MAX_CHARS is not small and
its refusal stands) and each stage is tried in turn at the keys that pass the one before: the split at the asked
fraction, else the smallest of FRACTIONS that holds text out; the tokenizer at the asked size, else at the most the
text supports (SentencePiece says it), rounded down; the windows against the held-out tokens that tokenizer makes.
The one line names every problem and the keys that pass them all."""

from __future__ import annotations

import dataclasses
import re
import tempfile
from pathlib import Path

from lmpt.config.schema import DataConfig, TokenizerConfig
from lmpt.errors import LmptError, SmallTextError
from lmpt.tokenizer.base import Tokenizer

FRACTIONS = (0.1, 0.2, 0.3, 0.5)
"""The held-out fractions suggested for a text too small for the asked one, the smallest that holds text out."""

MAX_CHARS = 2_000_000
"""A text longer than this is not small: its first refusal is said as it is."""

MOST = re.compile(r"at most ~(\d+)")


def say_all(data: DataConfig, tokenizer: TokenizerConfig, base_dir: Path, first: SmallTextError) -> LmptError:
    """The one refusal for a small text that met `first`: every problem and the keys that pass them all, or `first`
    itself where the text is no single small text of lmpt's own tokenizer (a mixture, a dataset, a pretrained
    tokenizer, over MAX_CHARS)."""
    documents = _documents(data, base_dir)
    if documents is None or tokenizer.backend == "hf" or tokenizer.model_file:
        return first
    try:
        problems, keys = _problems(documents, data, tokenizer)
    except LmptError:
        return first
    if not problems:
        return first
    words = sum(len(sentence.split()) for doc in documents for sentence in doc)
    given = " ".join(f"{key}={value}" for key, value in keys.items())
    return SmallTextError(
        f"this text is small ({words:,} words in {len(documents):,} documents): {'; '.join(problems)}. These keys "
        f"train on it: {given} (a text this small is learnt by heart within a few hundred steps: the run says when "
        "its held-out loss rises)"
    )


def _documents(data: DataConfig, base_dir: Path) -> list[list[str]] | None:
    from lmpt.data.mixture import resolve_sources
    from lmpt.data.sources import iter_documents

    sources = resolve_sources(data, base_dir)
    if len(sources) != 1 or sources[0].dataset is not None:
        return None
    documents, chars = [], 0
    for doc in iter_documents(sources[0].train_paths, sources[0].documents, data.text_field):
        chars += sum(len(sentence) for sentence in doc)
        if chars > MAX_CHARS:
            return None
        documents.append(doc)
    return documents


def _problems(
    documents: list[list[str]], data: DataConfig, tokenizer: TokenizerConfig
) -> tuple[list[str], dict[str, float | int]]:
    """Each stage tried at the keys that pass the stages before it: the problems found, and those keys."""
    problems: list[str] = []
    keys: dict[str, float | int] = {}
    fraction = data.val_fraction
    if not data.val_paths and not _holds_out(documents, fraction):
        sentences = sum(len(doc) for doc in documents)
        found = next((f for f in FRACTIONS if f > fraction and _holds_out(documents, f)), None)
        if found is None:
            raise LmptError("too small to split")
        problems.append(f"data.val_fraction={fraction:g} holds out none of its {sentences} sentences")
        fraction = keys["data.val_fraction"] = found
    train, val = _split(documents, fraction) if not data.val_paths else (documents, [])
    trained, size = _train(tokenizer, train)
    if size != tokenizer.vocab_size:
        problems.append(trained[1])
        keys["tokenizer.vocab_size"] = size
    encoded = trained[0]
    if val:
        held = sum(len(encoded.encode(" ".join(doc))) + 1 for doc in val)  # each document ends with eos
        fitting = [n for n in (512, 256, 128, 64, 32, 16) if n + 1 <= held]
        if data.seq_len + 1 > held:
            if not fitting:
                raise LmptError("too small to hold a window out")
            problems.append(
                f"data.seq_len={data.seq_len} makes windows longer than its {held} held-out tokens at that vocabulary"
            )
            keys["data.seq_len"] = fitting[0]
    return problems, keys


def _holds_out(documents: list[list[str]], fraction: float) -> bool:
    from lmpt.data.split import choose_unit

    try:
        choose_unit(lambda: iter(documents), fraction)
    except LmptError:
        return False
    return True


def _split(documents: list[list[str]], fraction: float) -> tuple[list[list[str]], list[list[str]]]:
    from lmpt.data.split import choose_unit, split_stream

    unit = choose_unit(lambda: iter(documents), fraction)
    train: list[list[str]] = []
    val: list[list[str]] = []
    for part, doc in split_stream(lambda: iter(documents), fraction, unit):
        (train if part == "train" else val).append(doc)
    return train, val


def _train(tokenizer: TokenizerConfig, train: list[list[str]]) -> tuple[tuple[Tokenizer, str], int]:
    """The tokenizer trained on `train` at the asked size, else at the most the text supports rounded down to a
    multiple of 64; ((tokenizer, the problem in words), the size it was trained at)."""
    from lmpt.tokenizer.load import load_tokenizer
    from lmpt.tokenizer.train import model_name, train_model

    assert tokenizer.vocab_size is not None, "lmpt's own tokenizer is trained at a size"
    size, said = tokenizer.vocab_size, ""
    try:
        model = train_model(tokenizer, lambda: iter(train))
    except LmptError as exc:
        most = MOST.search(str(exc))
        if most is None:
            raise
        size = int(most.group(1)) // 64 * 64
        said = f"tokenizer.vocab_size={tokenizer.vocab_size} is more than it supports (at most ~{most.group(1)})"
        model = train_model(dataclasses.replace(tokenizer, vocab_size=size), lambda: iter(train))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / model_name(tokenizer.backend)
        path.write_bytes(model)
        return (load_tokenizer(path), said), size
