"""A Hugging Face dataset streamed through `datasets` (data=hf): a Hub dataset by name, pinned to the commit its
revision resolves to, or a local parquet or JSONL file, a folder of data files, or a save_to_disk folder. Every
record gives one document, its `data.text_field` split into sentences as the parquet and JSONL readers split it,
so the same text gives the same documents whichever way it comes. `datasets` is imported only here, on first use."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lmpt.config.errors import require_extra
from lmpt.data.readers.text import MISSING, record_document, record_text
from lmpt.errors import LmptError

_FILE_BUILDERS = {".parquet": "parquet", ".jsonl": "json", ".json": "json", ".arrow": "arrow", ".txt": "text"}
_COMPRESSIONS = (".gz", ".zst", ".bz2", ".xz")
_SAVED_MARKERS = ("state.json", "dataset_dict.json")  # what save_to_disk writes beside its .arrow files
_LOCAL_HINT = "a local parquet, JSONL or save_to_disk path also works as data.name"


class StreamInterrupted(LmptError):
    """The stream broke off mid-way (a dropped connection): the shards sealed so far are kept for the next launch."""


@dataclass(frozen=True)
class HubDataset:
    """One split of a dataset, opened: on the Hub (`local` None; `revision` the commit it resolved to) or on disk."""

    name: str
    subset: str | None
    split: str
    revision: str | None
    local: Path | None
    stream: Any = field(compare=False, repr=False)
    """The `datasets.IterableDataset` of the split (iterating it again starts it again)."""

    @property
    def files(self) -> list[Path]:
        """Every file of a local dataset, in a fixed order (its fingerprint); none on the Hub."""
        if self.local is None:
            return []
        if self.local.is_file():
            return [self.local]
        return sorted(p for p in self.local.rglob("*") if p.is_file() and not p.name.startswith("."))

    def identity(self) -> dict[str, Any]:
        """What names the text: the dataset, its subset, split and revision (a local one's files are hashed too)."""
        where = "local" if self.local is not None else "hub"
        return {
            "dataset": self.name,
            "where": where,
            "subset": self.subset,
            "split": self.split,
            "revision": self.revision,
        }


def _builder_of(path: Path) -> str:
    name = path.name.lower()
    for compression in _COMPRESSIONS:
        name = name.removesuffix(compression)
    builder = next((b for suffix, b in _FILE_BUILDERS.items() if name.endswith(suffix)), None)
    if builder is None:
        raise LmptError(
            f"data.name={path} is not a parquet, JSONL, arrow or text file: give data=hf one of those, a folder of "
            "them or a save_to_disk folder"
        )
    return builder


def _local_path(name: str, base_dir: Path) -> Path | None:
    """The local file or folder `name` names, None for a Hub name; a path-like name that is missing is refused."""
    path = Path(name).expanduser()
    path = path if path.is_absolute() else base_dir / path
    if path.exists():
        return path.resolve()
    if name.startswith((".", "/", "~")) or Path(name).suffix.lower() in (*_FILE_BUILDERS, *_COMPRESSIONS):
        raise LmptError(
            f"data.name={name}: no such file or folder (looked for {path}; relative paths start at {base_dir}): "
            "fix the path, or give a Hugging Face Hub dataset's name"
        )
    return None


def _open_local(path: Path, subset: str | None, split: str) -> Any:
    import datasets

    saved = path.is_dir() and any((path / marker).is_file() for marker in _SAVED_MARKERS)
    if subset is not None and (saved or path.is_file()):
        raise LmptError(
            f"data.subset={subset}: {path} is one dataset without subsets (subsets are a Hub dataset's, or a folder "
            "of data files'): drop data.subset"
        )
    if saved:
        saved = datasets.load_from_disk(str(path))
        if isinstance(saved, datasets.DatasetDict):
            if split not in saved:
                raise LmptError(f"data.split={split}: {path} holds the splits {', '.join(saved)}: choose one of them")
            saved = saved[split]
        return saved.to_iterable_dataset()
    if path.is_file():
        return datasets.load_dataset(_builder_of(path), data_files={split: str(path)}, split=split, streaming=True)
    return datasets.load_dataset(str(path), subset, split=split, streaming=True)


def _resolve_revision(name: str, revision: str | None) -> str:
    """The commit `revision` (null: main) of Hub dataset `name` points at now; one line when it cannot be found."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError

    try:
        info = HfApi().dataset_info(name, revision=revision)
    except RevisionNotFoundError:
        raise LmptError(
            f"data.revision={revision} is not a branch, tag or commit of the dataset {name} on the Hugging Face "
            "Hub: fix data.revision or drop it (main)"
        ) from None
    except RepositoryNotFoundError:
        raise LmptError(
            f"data.name={name}: no such dataset on the Hugging Face Hub (or it is private or gated): check the "
            f"name, log in (`hf auth login`) for a gated one, or give a local copy; {_LOCAL_HINT}"
        ) from None
    except Exception as e:  # offline mode, no network, a proxy, a timeout: all say the Hub is out of reach
        raise LmptError(
            f"data.name={name}: the Hugging Face Hub cannot be reached ({_first_line(e)}): connect to the network "
            f"(and unset HF_HUB_OFFLINE and HF_DATASETS_OFFLINE) and run again; {_LOCAL_HINT}"
        ) from None
    return str(info.sha or revision or "main")


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return (text.splitlines()[0] if text else type(e).__name__)[:300]


def open_dataset(name: str, subset: str | None, split: str, revision: str | None, base_dir: Path) -> HubDataset:
    """Open split `split` of dataset `name` (a Hub name, or a path resolved against `base_dir`) as a stream,
    reading no record yet; a dataset that does not exist, cannot be reached or has no such subset or split is
    refused in one line before anything is written."""
    require_extra("datasets", "data=hf (a dataset streamed through Hugging Face `datasets`)")
    import datasets

    datasets.disable_progress_bars()  # lmpt's console says what is read; datasets' bars would interleave with it
    local = _local_path(name, base_dir)
    resolved = revision if local is not None else _resolve_revision(name, revision)
    try:
        if local is not None:
            stream = _open_local(local, subset, split)
        else:
            stream = datasets.load_dataset(name, subset, split=split, revision=resolved, streaming=True)
    except LmptError:
        raise
    except Exception as e:  # a missing subset or split, an unreadable file: datasets says which
        raise LmptError(
            f"data.name={name} (data.subset={subset}, data.split={split}) cannot be opened: {_first_line(e)}: "
            "check data.name, data.subset and data.split"
        ) from None
    return HubDataset(name, subset, split, resolved, local, stream)


def require_text_field(dataset: HubDataset, text_field: str) -> None:
    """Refuse a dataset whose known columns lack `text_field`, naming the columns it has (a stream whose columns
    are known only once read is checked record by record)."""
    features = getattr(dataset.stream, "features", None)
    if features is not None and text_field not in features:
        raise LmptError(
            f"data.name={dataset.name} has no column '{text_field}' (its columns: {', '.join(features) or 'none'}): "
            "set data.text_field to the column holding the text"
        )


def dataset_documents(dataset: HubDataset, text_field: str) -> Iterator[list[str]]:
    """The sentences of every record's `text_field`, in the dataset's order, streamed from its start. A record
    without text is refused naming it; a stream that breaks off raises StreamInterrupted."""
    record = 0
    try:
        for row in dataset.stream:
            record += 1
            where = f"data.name={dataset.name}, record {record}"
            doc = record_document(record_text(row.get(text_field, MISSING), where, text_field))
            if doc:
                yield doc
    except LmptError:
        raise
    except Exception as e:  # a dropped connection or a damaged file mid-way
        raise StreamInterrupted(
            f"data.name={dataset.name}: the stream broke off after {record:,} records ({_first_line(e)}): run the "
            "same command again to resume (the token cache keeps its sealed shards)"
        ) from None


def describe(dataset: HubDataset) -> str:
    """The dataset in words, for the console."""
    parts = [dataset.name, f"subset {dataset.subset}" if dataset.subset else "", f"split {dataset.split}"]
    if dataset.revision:
        parts.append(f"revision {dataset.revision}")
    return ", ".join(p for p in parts if p)


def identity_json(dataset: HubDataset) -> str:
    """The dataset's identity as canonical JSON (what the corpus fingerprint hashes)."""
    return json.dumps(dataset.identity(), sort_keys=True)
