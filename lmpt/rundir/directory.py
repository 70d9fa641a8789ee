"""The run directory: where a run lives, which checkpoint (if any) it continues from, and who holds it.

One run per directory: the process that trains in a run directory holds an exclusive lock on RUN/.lock for as long
as it lives (the kernel releases it when the process ends, however it ends). A second process is refused in one line
naming the holder's PID. Under torchrun only rank 0 takes it, for the whole job."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol, TypeVar

from omegaconf import DictConfig, OmegaConf

from lmpt.config.schema import DataConfig, TrainerConfig
from lmpt.console import info
from lmpt.errors import LmptError
from lmpt.locks import holder, try_lock
from lmpt.rundir.checkpoint import MANIFEST, CheckpointStore
from lmpt.rundir.drift import drifted_keys, flatten, refuse_drift
from lmpt.rundir.log import LOG_FILE, open_run_log
from lmpt.rundir.text import ReadText, RunText, recorded_text
from lmpt.safe_files import load_yaml, save_weights
from lmpt.tokenizer.base import RUN_FILE, Tokenizer
from lmpt.tokenizer.load import load_tokenizer

T = TypeVar("T")


class ProcessGroup(Protocol):
    """What claiming a run needs of the launch's process group (lmpt.train.distributed.Distributed is one): the room
    below training names it without importing it."""

    @property
    def is_main(self) -> bool: ...

    def main_first(self, work: Callable[[], T]) -> T: ...

    def broadcast_object(self, obj: object) -> object: ...


CONFIG_FILE = "config.yaml"
STATUS_FILE = "status.json"
TOKENIZER_FILE = "tokenizer.model"  # a SentencePiece run's; an hf or bytelevel run stores tokenizer.json
TOKENIZER_FILES = (TOKENIZER_FILE, "tokenizer.json")
METRICS_FILE = "metrics.jsonl"
FINAL_MODEL = "model.safetensors"
"""The final weights; its header metadata names the architecture (`arch`) and `vocab_size`."""
LEGACY_FINAL_MODEL = "model.pt"
"""What lmpt before safetensors wrote; still read, as data only (`weights_only=True`)."""


@dataclass
class RunDir:
    path: Path
    resume_from: Path | None
    text: RunText | None = None
    """A resumed run's text as this launch reads it (lmpt.rundir.text); None: a new run, whose data paths start at
    the working directory."""

    @property
    def checkpoints(self) -> Path:
        return self.path / "checkpoints"

    def checkpoint_store(self, keep_last: int) -> CheckpointStore:
        return CheckpointStore(self.checkpoints, keep_last)


SWEEP_RECORD = "multirun.yaml"
"""What Hydra writes into a sweep's directory before its jobs: the directory holds nothing else when no job kept a
folder (every job a dry run)."""


def _is_fresh(path: Path) -> bool:
    """Only Hydra's own .hydra/ folder or sweep record (and this launch's lock and lmpt.log) inside: the directory
    was made for this launch."""
    return path.is_dir() and all(p.name in (".hydra", SWEEP_RECORD, LOCK_FILE, LOG_FILE) for p in path.iterdir())


def discard_if_fresh(path: Path) -> None:
    """Remove a directory Hydra made for this launch when the run never started (bad input, a dry run, resume
    elsewhere), and the folders above it inside the launch directory that are left empty (`outputs/YYYY-MM-DD`,
    `outputs`)."""
    if not _is_fresh(path):
        return
    shutil.rmtree(path, ignore_errors=True)
    launch = Path.cwd().resolve()
    for parent in path.resolve().parents:
        made_here = launch in parent.parents or re.fullmatch(r"\d{4}-\d{2}-\d{2}", parent.name)
        if not made_here or any(parent.iterdir()):
            break
        parent.rmdir()


def locate_run(trainer: TrainerConfig, hydra_dir: Path, discard: bool = True) -> RunDir:
    """Resolve `trainer.resume`: auto (this directory's newest checkpoint), never, or a path to continue.
    `discard`: remove this launch's own fresh directory when continuing another (rank 0 only)."""
    mode = trainer.resume
    if mode in ("auto", "never"):
        latest = CheckpointStore(hydra_dir / "checkpoints", trainer.keep_last).latest_valid()
        if mode == "never" and latest is not None:
            raise LmptError(
                f"{hydra_dir} already has checkpoints and trainer.resume=never: "
                "pick a new hydra.run.dir or continue it with trainer.resume=auto"
            )
        return RunDir(hydra_dir, latest)
    target = Path(mode).expanduser().resolve()
    checkpoint: Path | None
    if (target / MANIFEST).exists():
        run, checkpoint = target.parent.parent, target
    elif (target / "checkpoints").is_dir():
        run = target
        checkpoint = CheckpointStore(target / "checkpoints", trainer.keep_last).latest_valid()
    else:
        raise LmptError(
            f"trainer.resume={mode}: not a run directory or checkpoint (expected {target}/checkpoints or "
            f"{target}/{MANIFEST})"
        )
    if checkpoint is None:
        raise LmptError(f"trainer.resume={mode}: {run} has no committed checkpoint to continue from")
    if discard and run.resolve() != hydra_dir.resolve():
        discard_if_fresh(hydra_dir)
    return RunDir(run, checkpoint)


def claim_run(
    trainer: TrainerConfig, hydra_dir: Path, config: DictConfig, data: DataConfig, ctx: ProcessGroup
) -> RunDir:
    """The run directory this launch trains in (`trainer.resume`), locked for the job (`ctx`: the process group),
    checked to hold this run's config; a resumed run's checkpoint checked for drift and its text (`data`'s paths)
    checked to be the text it recorded (lmpt.rundir.text); then its log opened (rank 0). A refusal writes nothing
    into the run directory."""
    run = locate_run(trainer, hydra_dir, discard=ctx.is_main)
    lock_for_job(run.path, ctx)  # before anything is read from or written to the run directory
    check_run_config(run, config)
    reading: ReadText | None = None
    if run.resume_from is not None:
        refuse_drift(run.resume_from, config)  # first: a changed data key is named as such
        opt_in = "data.allow_changed_text=true"
        reading = ctx.main_first(lambda: recorded_text(run.path, data, data.allow_changed_text, opt_in))
        run = dataclasses.replace(run, text=reading.text)
    if ctx.is_main:
        open_run_log(run.path)
    if reading is not None:
        reading.tell()  # once the log is open: a warning that the text changed stays in lmpt.log
    return run


def save_final_model(run_dir: Path, state: dict, arch: str, vocab_size: int) -> None:
    """The final weights, their header naming the architecture and vocabulary (what lmpt.rundir.trained reads)."""
    save_weights(run_dir / FINAL_MODEL, state, {"arch": arch, "vocab_size": str(vocab_size)})


def check_run_config(run: RunDir, cfg: DictConfig) -> None:
    """A config.yaml already in the run directory must be this run's (a killed or resumed run): a foreign one
    (another tool's, another run's, a planted `!!python` tag) is refused before anything is written."""
    path = run.path / CONFIG_FILE
    if not path.exists():
        return
    saved = load_yaml(path)
    if not isinstance(saved, DictConfig) or not {"objective", "model", "trainer"} <= set(saved.keys()):
        raise LmptError(f"{path} is not an lmpt run config: move it away or pick another hydra.run.dir")
    keys = drifted_keys(flatten(OmegaConf.to_container(saved, enum_to_str=True)), cfg)
    if keys:
        raise LmptError(
            f"{path} belongs to another run ({', '.join(keys[:4])}{' ...' if len(keys) > 4 else ''} differ from "
            "this command's): move it away or pick another hydra.run.dir"
        )


def write_run_config(run: RunDir, cfg: DictConfig) -> None:
    """The composed config, written when the run starts and again by each resume (which may only change the keys in
    lmpt.config.resume.MAY_CHANGE), so `lmpt trainer.resume=RUN` continues with the latest settings. The saved
    trainer.resume is auto: the next resume continues this directory's newest checkpoint, wherever it was moved; the
    saved data.allow_changed_text is false: allowing changed text holds for the launch that allowed it."""
    saved = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    assert isinstance(saved, dict)
    saved["trainer"]["resume"] = "auto"
    saved["data"]["allow_changed_text"] = False
    tmp = run.path / f".{CONFIG_FILE}.tmp"
    tmp.write_text(OmegaConf.to_yaml(saved))
    os.replace(tmp, run.path / CONFIG_FILE)


def write_status(run_dir: Path, status: str, **fields: object) -> None:
    """`status.json`: completed, preempted or failed (with the error), for reports and sweep summaries;
    replaced whole (written beside it, then renamed)."""
    if run_dir.is_dir():
        tmp = run_dir / f".{STATUS_FILE}.tmp"
        tmp.write_text(json.dumps({"status": status, **fields}) + "\n")
        os.replace(tmp, run_dir / STATUS_FILE)


def read_status(run_dir: Path) -> dict:
    """What `status.json` says (empty when it is missing or not a JSON object)."""
    try:
        status = json.loads((run_dir / STATUS_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return status if isinstance(status, dict) else {}


@contextlib.contextmanager
def failure_recorded(run_dir: Path | None, step: Callable[[], int]) -> Iterator[None]:
    """status.json says `failed`, with the one-line error and the step reached, when the body raises a user
    error (a full disk, non-finite weights) or is aborted by a second Ctrl-C. `run_dir` None: not rank 0."""
    try:
        yield
    except (LmptError, KeyboardInterrupt) as exc:
        if run_dir is not None:
            error = str(exc) if isinstance(exc, LmptError) else f"aborted: {exc}".rstrip(": ")
            with contextlib.suppress(OSError):  # best effort: the disk may be the very thing that is full
                write_status(run_dir, "failed", error=error, step=step())
        raise


def run_tokenizer_path(run_dir: Path) -> Path | None:
    """The tokenizer file a run directory holds (tokenizer.model or tokenizer.json), or None."""
    return next((run_dir / name for name in TOKENIZER_FILES if (run_dir / name).is_file()), None)


def save_run_tokenizer(run: RunDir, tokenizer: Tokenizer) -> None:
    """Write the run's tokenizer (a temporary file renamed into place: it is whole or absent). A resumed run
    keeps the one it has: that file, not the cache, decides its token ids."""
    if run.resume_from is not None and run_tokenizer_path(run.path) is not None:
        return
    path = run.path / f"tokenizer{tokenizer.suffix}"
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(tokenizer.model_bytes)
    os.replace(tmp, path)
    for stale in TOKENIZER_FILES:  # a run started over with another backend keeps one tokenizer file
        if stale != path.name:
            (run.path / stale).unlink(missing_ok=True)


def load_run_tokenizer(run: RunDir) -> Tokenizer | None:
    """The tokenizer a resumed run was trained with (None for a new run, or an old run that lacks the file):
    it is the authority on resume, whatever the cache or tokenizer.model_file hold now."""
    path = run_tokenizer_path(run.path)
    if run.resume_from is None or path is None:
        return None
    tokenizer = load_tokenizer(path, RUN_FILE)
    info(f"resuming with the run's own tokenizer {path}")
    return tokenizer


LOCK_FILE = ".lock"
_held: dict[Path, IO[str]] = {}  # open for the life of the run: closing the file releases the lock


def lock_run_dir(run_dir: Path) -> None:
    """Take `run_dir`'s lock for this process (a no-op if it already holds it); LmptError if another holds it."""
    run_dir = run_dir.resolve()
    if run_dir in _held:
        return
    handle = try_lock(run_dir / LOCK_FILE)  # held open until release_run_dirs
    if handle is None:
        raise LmptError(
            f"{run_dir} is in use by another lmpt process (PID {holder(run_dir / LOCK_FILE) or 'unknown'}): wait "
            "for it to end or stop it, or give this run its own hydra.run.dir"
        )
    handle.truncate(0)
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    _held[run_dir] = handle


def release_run_dirs() -> None:
    """Release every run directory this process holds (a sweep's jobs run one after another in one process)."""
    while _held:
        _, handle = _held.popitem()
        handle.close()


def lock_for_job(run_dir: Path, ctx: ProcessGroup) -> None:
    """Rank 0 takes the lock for every rank of the job (`ctx`: lmpt.train.distributed.Distributed); a refusal is
    raised on every rank, so none is left waiting in a collective."""
    error: str | None = None
    if ctx.is_main:
        try:
            lock_run_dir(run_dir)
        except LmptError as exc:
            error = str(exc)
    said = ctx.broadcast_object(error)
    if said is not None:
        raise LmptError(str(said))
