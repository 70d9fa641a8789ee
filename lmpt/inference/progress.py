"""A progress bar for long inference work (lmpt-eval's windows, lmpt-generate's tokens, a downstream task's
scoring and fine-tuning): on the console while the work runs, gone when it is done; never in json output. Off a
terminal (a pipe, nohup, a log) it is a plain line every PLAIN_EVERY_S of work (none for shorter work), as the
training display logs steps. Its description names the task and the phase running; its total counts units of equal cost
(tokens through the model, examples through the body), so the time left is steady."""

from __future__ import annotations

import time

from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from lmpt.console import console, info
from lmpt.train.display import format_duration

SPEED_WINDOW_S = 600.0
"""Seconds of progress the speed behind the time left is averaged over (rich's speed_estimate_period, 30 s by
default, follows every burst and pause). With units of equal cost the mean over the work done so far is the steady
estimate; ten minutes still lets a long job follow a machine that slows down."""


PLAIN_EVERY_S = 20.0
"""Seconds between the plain progress lines printed off a terminal."""


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
        self.plain = not hidden and not console.is_interactive
        self.unit = unit
        self.total, self.done, self.started, self.said = 0, 0, 0.0, 0.0

    def __enter__(self) -> WorkBar:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def start(self, total: int) -> None:
        """The amount of work, in the unit `advance` counts."""
        self.task = self.progress.add_task(self.description, total=total)
        self.total, self.done, self.started = total, 0, time.perf_counter()
        self.said = self.started

    def describe(self, description: str) -> None:
        """Name the phase now running (a fine-tuning seed, a recipe-search candidate), shown at once."""
        self.description = description
        if self.task is not None:
            self.progress.update(self.task, description=description, refresh=True)

    def advance(self, done: int = 1) -> None:
        if self.task is not None:
            self.progress.advance(self.task, done)
        self.done += done
        now = time.perf_counter()
        if self.plain and now - self.said >= PLAIN_EVERY_S and 0 < self.done < self.total:
            self.said, elapsed = now, now - self.started
            left = elapsed * (self.total - self.done) / self.done
            info(
                f"{escape(self.description)}: {self.done:,} of {self.total:,} {self.unit} "
                f"({self.done / self.total:.0%}) in {format_duration(elapsed)}, about {format_duration(left)} left"
            )
