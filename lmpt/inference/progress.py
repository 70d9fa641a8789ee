"""A progress bar for long inference work (lmpt-eval's windows, lmpt-generate's tokens, a downstream task's
scoring and fine-tuning): on the console while the work runs, gone when it is done; never in json output, and not
off a terminal (logs), as the training display. Its description names the task and the phase running; its total
counts units of equal cost (tokens through the model, examples through the body), so the time left is steady."""

from __future__ import annotations

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from lmpt.console import console

SPEED_WINDOW_S = 600.0
"""Seconds of progress the speed behind the time left is averaged over (rich's speed_estimate_period, 30 s by
default, follows every burst and pause). With units of equal cost the mean over the work done so far is the steady
estimate; ten minutes still lets a long job follow a machine that slows down."""


class WorkBar:
    """`with WorkBar("blimp-fast zero-shot", hidden=json, unit="tokens") as bar: bar.start(total); ... bar.advance(n)`;
    `bar.describe(...)` names the phase now running."""

    def __init__(self, description: str, hidden: bool, unit: str = "") -> None:
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn(unit),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=console,
            transient=True,
            disable=hidden or not console.is_interactive,
            speed_estimate_period=SPEED_WINDOW_S,
        )
        self.description = description
        self.task: TaskID | None = None

    def __enter__(self) -> WorkBar:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def start(self, total: int) -> None:
        """The amount of work, in the unit `advance` counts."""
        self.task = self.progress.add_task(self.description, total=total)

    def describe(self, description: str) -> None:
        """Name the phase now running (a fine-tuning seed, a recipe-search candidate), shown at once."""
        self.description = description
        if self.task is not None:
            self.progress.update(self.task, description=description, refresh=True)

    def advance(self, done: int = 1) -> None:
        if self.task is not None:
            self.progress.advance(self.task, done)
