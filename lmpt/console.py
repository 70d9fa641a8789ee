"""The one rich console every stage prints through (rank 0 only under torchrun)."""

from __future__ import annotations

import os

from rich.console import Console

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
