"""Decontamination against the run's downstream tasks: every item's word n-grams, hashed as datatrove hashes
them, in datatrove's index format; datatrove's NGramsDecontFilter then drops each training document that shares
one of them (GPT-3 and lm-eval drop on a shared 13-gram).

datatrove's own NGramsDecontIndexer is not used: it requires lighteval and loads its tasks through lighteval's
registry, which downloads the task datasets from the Hugging Face Hub. lmpt's tasks are local files, so the index
is built here from them, with datatrove's text normalisation, n-grams and hash function (the same as the indexer's
`compute_hashes` with its query n-grams on: an item is its context and its gold answer as one text)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from datatrove.pipeline.decont import NGramsDecontConfig
from datatrove.utils.hashing import create_hash_func
from datatrove.utils.text import ngrams, simplify_text

from lmpt.quality.words import WORDS

INDEX_SUFFIX = ".index.hashes"


@dataclass(frozen=True)
class TaskItems:
    """The texts of one task's scored items."""

    name: str
    texts: list[str]
    """The items' texts (lmpt.downstream.run_tasks reads them from the task files)."""


def decont_config(n_grams: int) -> NGramsDecontConfig:
    """datatrove's decontamination settings: `n_grams` words, its default normalisation and hash."""
    return NGramsDecontConfig(n_grams=n_grams, find_query_ngrams=True, find_overlap_ngrams=True)


def item_hashes(texts: list[str], n_grams: int) -> np.ndarray:
    """The sorted distinct hashes of every `n_grams`-word n-gram of `texts` (an item shorter than n has none)."""
    config = decont_config(n_grams)
    hash_func = create_hash_func(config.hash_config)
    found: set[int] = set()
    for text in texts:
        words = WORDS.word_tokenize(simplify_text(text, config.norm_config))
        found.update(hash_func(" ".join(gram)) for gram in ngrams(words, n_grams))
    return np.array(sorted(found), dtype=config.hash_config.np_descr)


def task_hashes(tasks: list[TaskItems], n_grams: int) -> dict[str, np.ndarray]:
    """Each task's n-gram hashes, by the file name datatrove's NGramsDecontFilter reads them from."""
    return {f"{task.name.replace(' ', '_')}{INDEX_SUFFIX}": item_hashes(task.texts, n_grams) for task in tasks}


def index_fingerprint(hashes: dict[str, np.ndarray], n_grams: int) -> str:
    """The tasks' part of the quality key: their names and n-gram hashes."""
    digest = hashlib.sha256(f"decontaminate:{n_grams}".encode())
    for name, values in sorted(hashes.items()):
        digest.update(name.encode() + b"\0" + values.tobytes())
    return digest.hexdigest()


def write_index(hashes: dict[str, np.ndarray], folder: Path) -> None:
    """Write each task's hashes as `folder/NAME.index.hashes` (datatrove's format)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, values in hashes.items():
        values.tofile(folder / name)
