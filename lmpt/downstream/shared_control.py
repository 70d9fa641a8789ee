"""One fine-tuned control per architecture and size, shared by every run that has it. A scratch control
(lmpt.downstream.control) depends on nothing a run trained: its fresh weights, the task's tokens, the recipe and the
code. Two runs whose controls agree on all of them (clm and gpt-bert at one seed; one objective at two budgets) would
fine-tune the same control bit for bit, so the first stores it and the others read it back: the cache directory's
controls/KEY.json ($LMPT_CACHE_DIR or ~/.cache/lmpt, as tokenizers), KEY a digest of every input and of lmpt's own
source, so a change to any of them, the code included, makes a new entry instead of reusing a stale one. An entry is
whole or absent (lmpt.safe_files.write_atomically); one that cannot be read is fine-tuned again."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from pathlib import Path

import numpy as np
import torch

from lmpt.downstream.labelled_task import Task
from lmpt.downstream.options import FinetuneOptions
from lmpt.downstream.recipe_search import RecipeSpace
from lmpt.downstream.significance import decode_outcomes, encode_outcomes
from lmpt.downstream.training import SeedRuns
from lmpt.downstream.tuning import Tuned
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
    root = Path(__file__).resolve().parents[1]
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode() + b"\x00" + path.read_bytes())
    return digest.hexdigest()


def _tensor_bytes(tensor: torch.Tensor) -> bytes:
    return tensor.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes()


def control_key(
    body: LanguageModel, task: Task, o: FinetuneOptions, space: RecipeSpace, precision: str, special: SpecialTokens,
    arch: str,
) -> str:  # fmt: skip
    """The digest of everything the control's fine-tuning reads: its weights, the task's token rows and labels, the
    recipe (options and search space), the precision, the architecture, the special tokens, torch and lmpt's code."""
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
    settings = {"classes": task.classes, "options": options, "space": dataclasses.asdict(space),
                "precision": precision, "arch": arch, "special": dataclasses.asdict(special),
                "torch": torch.__version__, "code": code_digest()}  # fmt: skip
    digest.update(json.dumps(settings, sort_keys=True, default=str).encode())
    return digest.hexdigest()[:32]


def _as_json(tuned: Tuned) -> dict:
    runs = tuned.runs
    correct = {split: [encode_outcomes(row) for row in rows.numpy()] for split, rows in runs.correct.items()}
    return {"lr": tuned.lr, "pooling": tuned.pooling, "steps": tuned.steps, "search": tuned.search,
            "runs": {"per_seed": runs.per_seed, "correct": correct, "examples": runs.examples,
                     "seconds": runs.seconds}}  # fmt: skip


def _from_json(entry: dict) -> Tuned:
    runs = entry["runs"]
    correct = {}
    for split, rows in runs["correct"].items():
        decoded = [decode_outcomes(row) for row in rows]
        if not decoded or any(row is None for row in decoded):
            raise ValueError("a control entry without its per-item outcomes")
        correct[split] = torch.from_numpy(np.stack(decoded))
    seed_runs = SeedRuns(runs["per_seed"], correct, int(runs["examples"]), float(runs["seconds"]))
    return Tuned(float(entry["lr"]), str(entry["pooling"]), int(entry["steps"]), seed_runs, entry["search"])


def controls_dir() -> Path:
    from lmpt.data.cache import default_cache_root

    return default_cache_root(None) / CONTROLS_DIR


def read_control(key: str) -> Tuned | None:
    """The control stored under `key`, or None (none stored, or an entry that cannot be read)."""
    try:
        return _from_json(json.loads((controls_dir() / f"{key}.json").read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def store_control(key: str, tuned: Tuned) -> None:
    """Keep `tuned` under `key` for the next run with the same control (a cache that cannot be written is skipped:
    the control is then fine-tuned again next time, nothing more)."""
    path = controls_dir() / f"{key}.json"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(_as_json(tuned), allow_nan=False)
        write_atomically(path, lambda tmp: tmp.write_text(text))
    except (OSError, ValueError):
        return
