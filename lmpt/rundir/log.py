"""`lmpt.log` in the run directory: every line the console prints (warnings included: skipped corrupt
checkpoints, non-finite steps, Python warnings) and the error that ends a run, each with a timestamp, appended
across resumes. Rank 0 keeps it; live progress bars are left out (their lines are the logged steps)."""

from __future__ import annotations

import os
import sys
import warnings
from datetime import datetime
from pathlib import Path
from typing import TextIO

from rich.console import Console, ConsoleRenderable, RenderHook
from rich.control import Control

from lmpt.config.errors import USER_ERRORS, describe
from lmpt.console import console

LOG_FILE = "lmpt.log"


class RunLog(RenderHook):
    """Sits under the console's other render hooks (a live progress display), so it sees what is printed."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.file: TextIO = open(path, "a", encoding="utf-8")  # closed by close_run_log
        # plain text, and wide enough that a table keeps whole paths (a terminal may be narrower)
        self.plain = Console(color_system=None, width=max(console.width, 160), soft_wrap=True, highlight=False)
        self._showwarning = warnings.showwarning

    def process_renderables(self, renderables: list[ConsoleRenderable]) -> list[ConsoleRenderable]:
        shown = [r for r in renderables if not isinstance(r, Control)]  # cursor moves of a live display
        if shown:
            with self.plain.capture() as captured:
                for renderable in shown:
                    self.plain.print(renderable, end="")
            self.write(captured.get())
        return renderables

    def write(self, text: str) -> None:
        """`text`, each of its lines behind a timestamp."""
        if self.file.closed:
            return
        stamp = datetime.now().astimezone().isoformat(timespec="seconds")
        for line in text.rstrip("\n").splitlines() or [""]:
            self.file.write(f"{stamp} {line.rstrip()}\n")
        self.file.flush()

    def _warning(self, message, category, filename, lineno, file=None, line=None) -> None:
        self.write(f"{category.__name__}: {message} ({filename}:{lineno})")
        self._showwarning(message, category, filename, lineno, file, line)


_active: RunLog | None = None


def open_run_log(run_dir: Path) -> None:
    """Start appending to `run_dir/lmpt.log` (rank 0): a header naming the command, then every console line."""
    global _active
    close_run_log()
    _active = RunLog(run_dir / LOG_FILE)
    _active.write(f"=== lmpt {' '.join(sys.argv[1:])} (pid {os.getpid()})")
    console.push_render_hook(_active)
    warnings.showwarning = _active._warning


def ending_line(exc: BaseException) -> str:
    """The line lmpt prints on stderr when `exc` ends a run."""
    if isinstance(exc, KeyboardInterrupt):
        return f"lmpt: aborted{f': {exc}' if str(exc) else ''}"
    if isinstance(exc, USER_ERRORS):
        return f"lmpt: error: {describe(exc)}"
    return f"{type(exc).__name__}: {exc}"


def close_run_log(ending: BaseException | None = None) -> None:
    """Stop logging; the line of the exception `ending` the run (already on stderr) goes in last."""
    global _active
    if _active is None:
        return
    if ending is not None:
        _active.write(ending_line(ending))
    warnings.showwarning = _active._showwarning
    if _active in console._render_hooks:  # rich keeps a stack: take ours off wherever it sits
        console._render_hooks.remove(_active)
    _active.file.close()
    _active = None
