"""Crash-safe checkpoints: written into a temporary directory, synced, sealed by a manifest of sizes and
checksums written last, then renamed into place. Only sealed checkpoints whose files match their
manifest are ever loaded, and only as data (lmpt.safe_files); pruning happens after the commit."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError

from lmpt.console import console
from lmpt.errors import LmptError
from lmpt.safe_files import (
    PICKLE_SUFFIX,
    WEIGHTS_SUFFIX,
    fsync_dir,
    interrupted,
    load_file_by_suffix,
    load_sharded,
    save_weights,
    write_failure,
)

MANIFEST = "manifest.json"
_STEP_DIR = re.compile(r"^step_(\d{8})$")
_WARNED: set[str] = set()  # the broken checkpoints this process has already warned about


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def manifest_problem(directory: Path) -> str | None:
    """Why `directory` is not a complete checkpoint, or None when every file matches its manifest."""
    try:
        manifest = json.loads((directory / MANIFEST).read_text())
        files = manifest["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return f"{MANIFEST} missing or unreadable"
    for name, expected in files.items():
        path = directory / name
        if not path.is_file():
            return f"{name}, listed in {MANIFEST}, is missing"
        if path.stat().st_size != expected["size"]:
            return f"{name} has {path.stat().st_size} bytes, the manifest says {expected['size']}"
        if _sha256(path) != expected["sha256"]:
            return f"{name} does not match its checksum"
    return None


class CheckpointStore:
    """The `checkpoints/` folder of a run: `step_00000100/` directories, newest last."""

    def __init__(self, directory: Path, keep_last: int) -> None:
        self.directory = directory
        self.keep_last = keep_last

    def committed(self) -> list[Path]:
        """Sealed checkpoint directories (a manifest present), oldest first; contents not yet verified."""
        if not self.directory.is_dir():
            return []
        found = [p for p in self.directory.iterdir() if _STEP_DIR.match(p.name) and (p / MANIFEST).exists()]
        return sorted(found, key=lambda p: p.name)

    def remove_leftovers(self) -> None:
        """Temporary and trashed directories are never checkpoints: a crash mid-write or mid-prune left them."""
        if self.directory.is_dir():
            for path in self.directory.iterdir():
                if path.name.startswith((".tmp-", ".trash-")):
                    shutil.rmtree(path, ignore_errors=True)

    def save(self, step: int, parts: dict[str, Any]) -> Path:
        """Commit `parts` (file name -> content: a `.safetensors` name takes a flat tensor dict, a `.pt` name
        tensors and plain data for torch.save) as the checkpoint of `step`, then prune. A failed write (a full
        disk) leaves the committed checkpoints as they were."""
        return self.commit(step, self.begin(step), parts)

    def staging(self, step: int) -> Path:
        """Where the checkpoint of `step` is written before its commit (the same path on every rank)."""
        return self.directory / f".tmp-step_{step:08d}"

    def begin(self, step: int) -> Path:
        """A fresh staging directory; sharded writers (torch.distributed.checkpoint) fill it before commit."""
        tmp = self.staging(step)

        def fresh() -> None:
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)

        self._guard(step, tmp, fresh)
        return tmp

    def commit(self, step: int, tmp: Path, parts: dict[str, Any]) -> Path:
        """Write `parts`, seal every file in `tmp` (shards included) with the manifest, rename into place."""
        self._guard(step, tmp, lambda: self._write(tmp, step, parts))
        final = self.directory / f"step_{step:08d}"
        if final.exists():  # an older attempt at the same step: move it aside, never overwrite in place
            os.rename(final, self.directory / f".trash-{final.name}-{os.getpid()}")
        os.rename(tmp, final)
        fsync_dir(self.directory)
        self.prune()
        return final

    def _guard(self, step: int, tmp: Path, write: Any) -> None:
        """Run `write`; a failed write (a full disk, even inside torch.save or safetensors) or a second Ctrl-C
        removes the staging directory and ends in one line saying which checkpoint still stands."""
        try:
            write()
        except (OSError, RuntimeError, SafetensorError, LmptError, KeyboardInterrupt) as exc:
            reason, aborted = write_failure(exc), interrupted(exc)
            if reason is None and not aborted:
                raise
            shutil.rmtree(tmp, ignore_errors=True)
            previous = self.committed()
            kept = f"the previous checkpoint {previous[-1].name} is intact" if previous else "no checkpoint existed yet"
            name = self.directory / f"step_{step:08d}"
            if aborted:
                message = f"checkpoint {name} was not written; {kept}: run the same command to resume"
                raise KeyboardInterrupt(message) from None
            raise LmptError(
                f"could not write checkpoint {name} ({reason}); {kept}: free space and run the same command to resume"
            ) from None

    def _write(self, tmp: Path, step: int, parts: dict[str, Any]) -> None:
        for name, obj in parts.items():
            if name.endswith(WEIGHTS_SUFFIX):
                save_weights(tmp / name, obj)
                continue
            with open(tmp / name, "wb") as f:
                torch.save(obj, f)
                f.flush()
                os.fsync(f.fileno())
        files = {}
        for path in sorted(p for p in tmp.rglob("*") if p.is_file()):
            if path.name not in parts:  # shards written by other processes: make them durable too
                with open(path, "rb") as f:
                    os.fsync(f.fileno())
            files[str(path.relative_to(tmp))] = {"size": path.stat().st_size, "sha256": _sha256(path)}
        with open(tmp / MANIFEST, "w") as f:
            json.dump({"step": step, "files": files}, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        for folder in {p.parent for p in tmp.rglob("*")} | {tmp}:
            fsync_dir(folder)

    def prune(self) -> None:
        for old in self.committed()[: -self.keep_last]:
            trash = self.directory / f".trash-{old.name}-{os.getpid()}"
            os.rename(old, trash)  # atomic: a prune cut short leaves no half-deleted checkpoint behind
            shutil.rmtree(trash, ignore_errors=True)
        self.remove_leftovers()

    def latest_valid(self, using: str = "resuming from") -> Path | None:
        """The newest checkpoint that passes its manifest, warning loudly (once per process) about any newer broken
        one; `using` says what the command does with the good one ("resuming from", "loading").
        Raises LmptError when checkpoints exist but none is valid (never start over silently)."""
        if not self.directory.is_dir():
            return None
        # every step directory, with or without its manifest: only a commit's rename makes one, so a missing
        # manifest is damage to report, never a half-written checkpoint to pass over in silence
        candidates = sorted((p for p in self.directory.iterdir() if _STEP_DIR.match(p.name)), key=lambda p: p.name)
        broken: list[str] = []
        for path in reversed(candidates):
            problem = manifest_problem(path)
            if problem is None:
                for bad in broken:
                    if bad not in _WARNED:  # a command that locates the weights twice warns once
                        _WARNED.add(bad)
                        console.print(f"[bold red]WARNING[/] skipping corrupt checkpoint {bad}; {using} {path.name}")
                return path
            broken.append(f"{path} ({problem})")
        if broken:
            raise LmptError(
                f"no valid checkpoint in {self.directory}: {'; '.join(broken)}. "
                "Nothing was deleted; move the folder away to start over, or point trainer.resume at a good one"
            )
        return None


def load_parts(directory: Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Every part (`model.safetensors`, `optimizer.pt`, `trainer.pt`) of a verified checkpoint, by stem."""
    problem = manifest_problem(directory)
    if problem is not None:
        raise LmptError(f"checkpoint {directory} is not usable: {problem}")
    parts = sorted(p for p in directory.iterdir() if p.suffix in (WEIGHTS_SUFFIX, PICKLE_SUFFIX) and p.is_file())
    return {p.stem: load_file_by_suffix(p, map_location) for p in parts}


def load_part(directory: Path, stem: str, map_location: str | torch.device = "cpu") -> Any:
    """One part of a verified checkpoint (e.g. `trainer` for its config), read as data."""
    problem = manifest_problem(directory)
    if problem is not None:
        raise LmptError(f"checkpoint {directory} is not usable: {problem}")
    for suffix in (WEIGHTS_SUFFIX, PICKLE_SUFFIX):
        if (directory / f"{stem}{suffix}").is_file():
            return load_file_by_suffix(directory / f"{stem}{suffix}", map_location)
    raise LmptError(f"checkpoint {directory} has no {stem} part")


def save_sharded(model: torch.nn.Module, optimizer: torch.optim.Optimizer, staging: Path) -> None:
    """FSDP, collective: every rank writes its shards of the model and optimizer into `staging/sharded`
    (torch.distributed.checkpoint), before rank 0 commits the checkpoint."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    model_state, optimizer_state = get_state_dict(model, optimizer)
    dcp.save({"model": model_state, "optimizer": optimizer_state}, checkpoint_id=str(staging / "sharded"))


def load_sharded_into(model: torch.nn.Module, optimizer: torch.optim.Optimizer, checkpoint: Path) -> None:
    """FSDP, collective: every rank reads its shards of the model and optimizer from `checkpoint/sharded`."""
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    model_state, optimizer_state = get_state_dict(model, optimizer)
    load_sharded({"model": model_state, "optimizer": optimizer_state}, checkpoint / "sharded")  # in place
    set_state_dict(model, optimizer, model_state_dict=model_state, optim_state_dict=optimizer_state)
