"""A progress bar for long inference work (lmpt-eval's windows, lmpt-generate's tokens): on the console while the
work runs, gone when it is done; never in json output, and not off a terminal (logs), as the training display."""

from __future__ import annotations

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from lmpt.console import console


class WorkBar:
    """`with WorkBar("scoring windows", hidden=json) as bar: bar.start(total); ... bar.advance(n)`."""

    def __init__(self, description: str, hidden: bool) -> None:
        self.progress = Progress(
            TextColumn(description), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn(),
            console=console, transient=True, disable=hidden or not console.is_interactive,
        )  # fmt: skip
        self.task: int | None = None

    def __enter__(self) -> WorkBar:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def start(self, total: int) -> None:
        """The amount of work, in the unit `advance` counts."""
        self.task = self.progress.add_task("", total=total)

    def advance(self, done: int = 1) -> None:
        if self.task is not None:
            self.progress.advance(self.task, done)
