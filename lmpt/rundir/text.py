"""The text a run trains on, recorded in RUN/text.json by each launch: the corpus fingerprint (the one the token
cache's key holds, lmpt.data.fingerprint: each file's bytes and how the text splits), the folder its relative data
paths start at (the first launch's working directory), and each file read, resolved, with its size and content hash.

A resume and `lmpt-eval RUN held_out=true` read the run's own text: its data paths resolve against the recorded
folder, whatever folder they start in (`bundled:NAME` is the package's copy, as always). Text whose fingerprint
differs from the record (another file, a file appended to, a dataset at another revision) is refused in one line
naming the run and what changed, unless the user allows it for that launch. Text moved away from the recorded folder
is found again from the working directory when it is the same text. A run recorded before lmpt kept text.json reads
its data paths from the working directory, as it did before."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from rich.markup import escape

from lmpt.config.schema import DataConfig
from lmpt.console import info, warn
from lmpt.data.cache import default_cache_root
from lmpt.data.fingerprint import corpus_fingerprint, file_sha256, memo_dir
from lmpt.data.mixture import resolve_sources
from lmpt.errors import LmptError

TEXT_FILE = "text.json"


@dataclass(frozen=True)
class TextFile:
    """One file of a run's text."""

    path: Path
    """Resolved (absolute, links followed)."""
    size: int
    sha256: str


@dataclass(frozen=True)
class RunText:
    """A run's text as read on one launch."""

    launch_dir: Path
    """The folder its relative data paths start at."""
    fingerprint: str
    """lmpt.data.fingerprint.corpus_fingerprint of the text."""
    files: tuple[TextFile, ...]
    """Every file its data paths name (a data=hf dataset streamed from the Hub has none)."""
    dataset: dict | None = None
    """data=hf: the dataset's identity (name, subset, split, the revision it resolved to)."""


def text_at(cfg: DataConfig, launch_dir: Path) -> RunText:
    """The text `cfg`'s data paths name, relative ones resolved against `launch_dir`; its files are hashed only where
    the fingerprint's memory has no hash of them yet (LmptError when a path names nothing)."""
    memo = memo_dir(default_cache_root(cfg.cache_dir))
    sources = resolve_sources(cfg, launch_dir)
    fingerprint = corpus_fingerprint(cfg, sources, memo)
    datasets = [s.dataset for s in sources if s.dataset is not None]
    paths = [p for s in sources for p in (*s.train_paths, *s.val_paths, *(s.dataset.files if s.dataset else []))]
    # the fingerprint just remembered every file's hash: looked up by stat, none is read again
    files = tuple(TextFile(p, p.stat().st_size, file_sha256(p, memo, "stat")[0]) for p in paths)
    return RunText(launch_dir.resolve(), fingerprint, files, datasets[0].identity() if datasets else None)


def write_run_text(run_dir: Path, text: RunText) -> None:
    """RUN/text.json, replaced whole (written beside it, then renamed)."""
    record = {
        "fingerprint": text.fingerprint,
        "launch_dir": str(text.launch_dir),
        "files": [{"path": str(f.path), "size": f.size, "sha256": f.sha256} for f in text.files],
        "dataset": text.dataset,
    }
    tmp = run_dir / f".{TEXT_FILE}.tmp"
    tmp.write_text(json.dumps(record, indent=1) + "\n")
    os.replace(tmp, run_dir / TEXT_FILE)


def read_run_text(run_dir: Path) -> RunText | None:
    """What RUN/text.json records, or None for a run recorded before lmpt kept it; one that is not lmpt's record is
    refused naming it."""
    path = run_dir / TEXT_FILE
    if not path.exists():
        return None
    try:
        record = json.loads(path.read_text())
        files = tuple(TextFile(Path(f["path"]), int(f["size"]), str(f["sha256"])) for f in record["files"])
        return RunText(Path(record["launch_dir"]), str(record["fingerprint"]), files, record.get("dataset"))
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise LmptError(
            f"{path} is not lmpt's record of the run's text ({type(exc).__name__}: {exc}): restore it from a copy of "
            "the run, or move it away to read the run's data paths from this folder"
        ) from None


def _changes(old: RunText, new: RunText) -> str:
    """What differs between two readings of a run's text, in a few words."""
    before, after = {f.path: f for f in old.files}, {f.path: f for f in new.files}
    said = []
    for path in sorted(before.keys() | after.keys()):
        was, now = before.get(path), after.get(path)
        if was is None:
            said.append(f"{path} is new")
        elif now is None:
            said.append(f"{path} is gone")
        elif was.sha256 != now.sha256:
            said.append(f"{path} changed ({was.size:,} bytes then, {now.size:,} now)")
    if old.dataset != new.dataset:
        said.append(f"the dataset was {old.dataset}, now {new.dataset}")
    more = f" and {len(said) - 3} more" if len(said) > 3 else ""
    return ", ".join(said[:3]) + more if said else "the way its text splits into documents differs"


@dataclass(frozen=True)
class ReadText:
    """The text a launch reads for a run, and what to tell the user about it (once the run's log is open)."""

    text: RunText
    notice: str = ""
    """A console line (rich markup escaped): where the text was found, or how it changed."""
    changed: bool = False
    """The text differs from the run's record (allowed): the notice is a warning."""

    def tell(self) -> None:
        """Print the notice, if any."""
        if self.notice:
            (warn if self.changed else info)(self.notice)


def _reading(recorded: RunText, cfg: DataConfig) -> RunText:
    """The run's text where it was recorded; where that names nothing any more, what the working directory holds
    under the same data paths (a run and its text moved together); neither: LmptError naming the recorded place."""
    try:
        return text_at(cfg, recorded.launch_dir)
    except LmptError as missing:
        here = Path.cwd().resolve()
        if here == recorded.launch_dir:
            raise
        try:
            return text_at(cfg, here)
        except LmptError:
            raise missing from None


def recorded_text(run_dir: Path, cfg: DataConfig, allow_changed: bool, opt_in: str) -> ReadText:
    """The text a resume (or lmpt-eval held_out=true) of `run_dir` reads: its data paths `cfg` resolved where
    RUN/text.json says they started, checked against that record. Changed text raises LmptError naming the run, the
    files and what changed, unless `allow_changed`; `opt_in` is the setting that allows it, named in the refusal."""
    recorded = read_run_text(run_dir)
    if recorded is None:
        here = Path.cwd().resolve()
        note = f"{run_dir} has no {TEXT_FILE} (it began before lmpt kept one): its data paths start at {here}"
        return ReadText(text_at(cfg, here), escape(note))
    try:
        now = _reading(recorded, cfg)
    except LmptError as missing:
        raise LmptError(
            f"cannot read the text {run_dir} trained on: {missing}: restore it there, or launch from a folder where "
            "the run's data paths hold it"
        ) from None
    if now.fingerprint == recorded.fingerprint:
        moved = now.launch_dir != recorded.launch_dir
        note = f"{run_dir}'s text is no longer under {recorded.launch_dir}: reading the same text from {now.launch_dir}"
        return ReadText(now, escape(note) if moved else "")
    change = f"{run_dir}'s text differs from what {run_dir / TEXT_FILE} records: {_changes(recorded, now)}"
    if not allow_changed:
        raise LmptError(
            f"{change}. Restore the text the run trained on (or start a new run on this text), or set {opt_in} to go "
            "on with it"
        )
    return ReadText(now, escape(f"{change}: going on with this text ({opt_in})"), changed=True)
