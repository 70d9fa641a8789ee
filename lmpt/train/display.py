"""What the training loop shows: a rich live display on a terminal, plain lines in logs (CI, SLURM),
tqdm on request, and a summary table at the end."""

from __future__ import annotations

import time
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Column, Table

from lmpt.console import console, is_main_process

_SHOWN = ("loss", "ppl", "acc", "nsp_acc", "lr", "grad_norm", "tokens_per_s", "mfu", "peak_memory_mb")


def _fmt(name: str, value: Any) -> str:
    if name == "lr":
        return f"lr {value:.2e}"
    if name == "tokens_per_s":
        return f"{value / 1000:.1f}k tok/s"
    if name == "grad_norm":
        return f"gnorm {value:.2f}"
    if name == "mfu":
        return "mfu n/a (emulated precision)" if value is None else f"mfu {100 * value:.1f}%"
    if name == "peak_memory_mb":
        return f"mem {value:,.0f}MB"
    if name.split("/")[0].endswith("ppl"):  # also a source's val_ppl/NAME
        return f"{name} {value:.2f}"
    return f"{name} {value:.4f}"


def format_record(record: dict) -> str:
    shown = [_fmt(k, record[k]) for k in _SHOWN if k in record]
    shown += [_fmt(k, v) for k, v in record.items() if k.startswith("loss/")]
    return " | ".join(shown)


def format_eval(record: dict) -> str:
    return " | ".join(_fmt(k, v) for k, v in record.items() if k.startswith("val_"))


class Display:
    """Plain lines: one per logged step and per evaluation (the mode for non-terminals)."""

    def __init__(self, max_steps: int) -> None:
        self.max_steps = max_steps
        self.started = time.perf_counter()
        self.first_step: int | None = None

    def eta(self, step: int) -> str:
        if self.first_step is None or step <= self.first_step:
            return "?"
        per_step = (time.perf_counter() - self.started) / (step - self.first_step)
        seconds = int(per_step * (self.max_steps - step))
        return f"{seconds // 60}m{seconds % 60:02d}s"

    def start(self, step: int) -> None:
        self.first_step = step
        self.started = time.perf_counter()

    def log(self, step: int, record: dict) -> None:
        console.print(f"step {step:>6}/{self.max_steps} | {format_record(record)} | eta {self.eta(step)}")

    def evaluating(self, step: int, what: str = "validation loss") -> None:
        """Called as an evaluation begins: a live display says so (it would look frozen) until `evaluation` reports
        it or the next step starts. Plain lines say nothing: the eval line follows."""

    def evaluation(self, step: int, record: dict) -> None:
        console.print(f"[bold cyan]eval[/] step {step:>6} | {format_eval(record)}")

    def advance(self, step: int) -> None:
        """Called after every optimizer step."""

    def close(self) -> None:
        pass


TRAINING, EVALUATING = "[bold]train", "[bold cyan]evaluating"
"""What the live bar's first column says while the run trains, and while it evaluates."""


class RichDisplay(Display):
    """A live progress bar with the latest metrics, saying when the run evaluates; evaluations print above it."""

    def __init__(self, max_steps: int) -> None:
        super().__init__(max_steps)
        self.progress = Progress(
            TextColumn("{task.description}", table_column=Column(no_wrap=True, min_width=len("evaluating"))),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            TextColumn("{task.fields[metrics]}"),
            console=console,
        )
        self.task = self.progress.add_task(TRAINING, total=max_steps, metrics="")
        self.metrics = ""

    def start(self, step: int) -> None:
        super().start(step)
        self.progress.update(self.task, completed=step)
        self.progress.start()

    def log(self, step: int, record: dict) -> None:
        self.metrics = format_record(record)
        self.progress.update(self.task, metrics=self.metrics)

    def evaluating(self, step: int, what: str = "validation loss") -> None:
        self.progress.update(self.task, description=EVALUATING, metrics=f"[cyan]{what}[/]", refresh=True)

    def evaluation(self, step: int, record: dict) -> None:
        self.progress.update(self.task, description=TRAINING, metrics=self.metrics, refresh=True)
        self.progress.console.print(f"[bold cyan]eval[/] step {step:>6} | {format_eval(record)}")

    def advance(self, step: int) -> None:
        self.progress.update(self.task, completed=step, description=TRAINING, metrics=self.metrics)

    def close(self) -> None:
        self.progress.stop()


class TqdmDisplay(Display):
    def __init__(self, max_steps: int) -> None:
        super().__init__(max_steps)
        from tqdm import tqdm

        self.bar = tqdm(total=max_steps, dynamic_ncols=True)

    def start(self, step: int) -> None:
        super().start(step)
        self.bar.n = step
        self.bar.refresh()

    def log(self, step: int, record: dict) -> None:
        self.bar.set_postfix_str(format_record(record), refresh=False)

    def evaluating(self, step: int, what: str = "validation loss") -> None:
        self.bar.set_description(f"evaluating {what}")

    def evaluation(self, step: int, record: dict) -> None:
        self.bar.set_description("", refresh=False)
        self.bar.write(f"eval step {step} | {format_eval(record)}")

    def advance(self, step: int) -> None:
        if self.bar.desc:
            self.bar.set_description("", refresh=False)
        self.bar.update(step - self.bar.n)

    def close(self) -> None:
        self.bar.close()


class SilentDisplay(Display):
    """Ranks other than 0 show nothing."""

    def log(self, step: int, record: dict) -> None:
        pass

    def evaluation(self, step: int, record: dict) -> None:
        pass


def make_display(mode: str, max_steps: int) -> Display:
    if not is_main_process():
        return SilentDisplay(max_steps)
    if mode == "auto":
        mode = "rich" if console.is_terminal else "plain"
    return {"rich": RichDisplay, "tqdm": TqdmDisplay, "plain": Display}[mode](max_steps)


def summary_table(rows: dict[str, str]) -> Table:
    table = Table(title="run summary", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    for key, value in rows.items():
        table.add_row(key, value)
    return table
