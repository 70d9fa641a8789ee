"""One fine-tuned control per architecture and size, shared by every run that has it. A scratch control
(lmpt.downstream.control) depends on nothing a run trained: its fresh weights, the task's tokens, the recipe and the
code. Two runs whose controls agree on all of them (clm and gpt-bert at one seed; one objective at two budgets) would
fine-tune the same control bit for bit, so the first stores it and the others read it back: the cache directory's
controls/KEY.json ($LMPT_CACHE_DIR or ~/.cache/lmpt, as tokenizers), KEY a digest of every input and of lmpt's own
source, so a change to any of them, the code included, makes a new entry instead of reusing a stale one. An entry is
whole or absent (lmpt.safe_files.write_atomically) and carries a digest of its own content
(lmpt.downstream.finetuning.control_entry); one changed since it was stored, malformed or unreadable is named in one
line and fine-tuned again, and the record names the digest of the entry its figures came from."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import sys
from pathlib import Path

import torch
from rich.markup import escape

from lmpt.console import warn
from lmpt.downstream.finetuning.control_entry import DIGEST, EntryProblem, Shape, decode_entry, encode_entry
from lmpt.downstream.finetuning.encoded_task import Task
from lmpt.downstream.finetuning.recipe_search import RecipeSpace
from lmpt.downstream.finetuning.targets import Target
from lmpt.downstream.finetuning.tuning import Tuned
from lmpt.downstream.tasks.options import FinetuneOptions
from lmpt.errors import LmptError
from lmpt.model import LanguageModel
from lmpt.safe_files import write_atomically
from lmpt.tokenizer.special import SpecialTokens

CONTROLS_DIR = "controls"
UNKEYED_OPTIONS = ("data", "task", "json", "control", "device")
"""FinetuneOptions that do not change what the control computes (the files are in the key as their tokens; the
device as the weights' and the precision's)."""


@functools.cache
def code_digest() -> str:
    """A digest of lmpt's source files: a control stored by other code is never read back."""
    digest = hashlib.sha256()
    root = Path(__file__).resolve().parents[2]  # lmpt/
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode() + b"\x00" + path.read_bytes())
    return digest.hexdigest()


def _tensor_bytes(tensor: torch.Tensor) -> bytes:
    return tensor.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes()


def control_key(
    body: LanguageModel,
    task: Task,
    o: FinetuneOptions,
    space: RecipeSpace,
    precision: str,
    special: SpecialTokens,
    arch: str,
    official: bool = False,
) -> str:
    """The digest of everything the control's fine-tuning reads: its weights, the task's token rows and labels, the
    recipe (options and search space), the precision, the architecture, the special tokens, torch and lmpt's code;
    `official`: its seeds carry a GLUE task's official figures (a control without them never stands in)."""
    digest = hashlib.sha256()
    for name, tensor in sorted(body.state_dict().items()):
        digest.update(name.encode() + str(tensor.dtype).encode() + str(tuple(tensor.shape)).encode())
        digest.update(_tensor_bytes(tensor))
    for split in (task.train, task.dev, task.test):
        if split is None:
            digest.update(b"no split")
            continue
        for rows in (split.rows, split.segments or []):
            for row in rows:
                digest.update(_tensor_bytes(row) + b"\x00")
        digest.update(_tensor_bytes(split.labels))
    options = {k: v for k, v in dataclasses.asdict(o).items() if k not in UNKEYED_OPTIONS}
    settings = {
        "classes": task.classes,
        "options": options,
        "space": dataclasses.asdict(space),
        "precision": precision,
        "arch": arch,
        "special": dataclasses.asdict(special),
        "torch": torch.__version__,
        "code": code_digest(),
        "official": official,
    }
    digest.update(json.dumps(settings, sort_keys=True, default=str).encode())
    return digest.hexdigest()[:32]


def controls_dir() -> Path:
    from lmpt.data.cache import default_cache_root

    return default_cache_root(None) / CONTROLS_DIR


def read_control(key: str, shape: Shape, target: Target, hidden: bool = False) -> tuple[Tuned, str] | None:
    """The control stored under `key` and its content digest, or None: none stored, or an entry that cannot be
    trusted (its content changed since it was stored, or malformed for a task of `shape` predicting `target`
    (control_entry.decode_entry)), which one line names
    before the control is fine-tuned again (and the entry replaced): a console warning, or with `hidden` (json=true:
    stdout holds the JSON alone) a line on stderr."""
    path = controls_dir() / f"{key}.json"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return None  # none stored (or unreadable as a file): the control is fine-tuned, nothing more to say
    try:
        return decode_entry(json.loads(text), shape, target)
    except (ValueError, RecursionError) as exc:  # EntryProblem is a ValueError, as is JSON that does not parse
        reason = str(exc) if isinstance(exc, EntryProblem) else "is not JSON"
        said = f"the shared control {path} {reason}: fine-tuning the control again in its place"
        if hidden:
            print(f"lmpt: warning: {said}", file=sys.stderr)
        else:
            warn(escape(said))
        return None


def store_control(key: str, tuned: Tuned) -> str | None:
    """Keep `tuned` under `key` for the next run with the same control; the digest of its content, or None when the
    cache cannot be written (the control is then fine-tuned again next time, nothing more)."""
    path = controls_dir() / f"{key}.json"
    try:
        entry = encode_entry(tuned)
        path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(entry, allow_nan=False)
        write_atomically(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    except (OSError, ValueError, LmptError):
        return None
    return str(entry[DIGEST])
