"""Decontamination against the run's downstream tasks: every item's word n-grams, hashed as datatrove hashes
them, in datatrove's index format; datatrove's NGramsDecontFilter then drops each training document that shares
one of them (GPT-3 and lm-eval drop on a shared 13-gram).

datatrove's own NGramsDecontIndexer is not used: it requires lighteval and loads its tasks through lighteval's
registry, which downloads the task datasets from the Hugging Face Hub. lmpt's tasks are local files, so the index
is built here from them, with datatrove's text normalisation, n-grams and hash function (the same as the indexer's
`compute_hashes` with its query n-grams on: an item is its context and its gold answer as one text)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from datatrove.pipeline.decont import NGramsDecontConfig
from datatrove.utils.hashing import create_hash_func
from datatrove.utils.text import ngrams, simplify_text

from lmpt.data.readers.jsonl import jsonl_records
from lmpt.downstream.after_training import classification_task
from lmpt.downstream.choice_tasks import BUNDLED_PREFIX, read_choice_task, task_name, tasks_dir
from lmpt.errors import LmptError
from lmpt.quality.words import WORDS

INDEX_SUFFIX = ".index.hashes"


@dataclass(frozen=True)
class TaskItems:
    """The texts of one task's scored items."""

    name: str
    texts: list[str]


def _record_texts(path: Path) -> Iterator[str]:
    """Every string field of every record of a .jsonl file, as one text per record."""
    for _, record in jsonl_records(path):
        values = record.values() if isinstance(record, dict) else [record]
        text = " ".join(v for v in values if isinstance(v, str))
        if text.strip():
            yield text


def read_task_items(task: str, key: str) -> TaskItems:
    """A task's items: a classification folder's dev and test records, or a multiple-choice task's contexts each
    followed by its gold answer. A task that cannot be read is one LmptError naming `key`."""
    try:
        path = Path(task).expanduser()
        if path.is_dir() or _bundled_folder(task):
            found = classification_task(task, key)
            files = [Path(found.data.dev), *([Path(found.data.test)] if found.data.test else [])]
            return TaskItems(found.name, [text for file in files for text in _record_texts(file)])
        questions = read_choice_task(task)
        return TaskItems(task_name(task), [f"{q.context} {q.choices[q.label]}" for q in questions])
    except LmptError as exc:
        raise LmptError(f"{key}: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise LmptError(
            f"{key}={task} cannot be read ({exc.__class__.__name__}: {exc}): fix the file or drop it"
        ) from None


def _bundled_folder(task: str) -> bool:
    return task.startswith(BUNDLED_PREFIX) and (tasks_dir() / task.removeprefix(BUNDLED_PREFIX)).is_dir()


def run_tasks(choice_tasks: list[str], classification_tasks: list[str], extra: list[str]) -> list[TaskItems]:
    """The items of every task to decontaminate against, each read now (so a bad file stops before any work)."""
    keyed = [(f"downstream.choice_tasks[{i}]", t) for i, t in enumerate(choice_tasks)]
    keyed += [(f"downstream.classification_tasks[{i}]", t) for i, t in enumerate(classification_tasks)]
    keyed += [(f"quality.decontaminate_tasks[{i}]", t) for i, t in enumerate(extra)]
    return [read_task_items(str(task), key) for key, task in keyed]


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
