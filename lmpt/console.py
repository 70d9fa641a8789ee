"""The one rich console every stage prints through (rank 0 only under torchrun)."""

from __future__ import annotations

import os

from rich.console import Console, RenderableType

console = Console(highlight=False, soft_wrap=True)  # log lines stay whole in files and CI logs


def is_main_process() -> bool:
    return int(os.environ.get("RANK", "0")) == 0


def info(message: str) -> None:
    """One status line (rich markup allowed), printed by rank 0 only."""
    if is_main_process():
        console.print(message)


def warn(message: str) -> None:
    """One warning line (rich markup allowed) after a yellow WARNING, printed by rank 0 only."""
    info(f"[bold yellow]WARNING[/] {message}")


def print_whole(renderable: RenderableType) -> None:
    """Print at the renderable's natural width when output goes to a file or pipe (rich would squeeze it to
    80 columns); a terminal keeps its own width."""
    if console.is_terminal:
        console.print(renderable)
        return
    wide = console.options.update_width(10_000)
    width = max(console.width, console.measure(renderable, options=wide).maximum)
    before = console.width
    console.width = width  # through the console itself: its render hooks (lmpt.log) see the lines
    try:
        console.print(renderable)
    finally:
        console.width = before
