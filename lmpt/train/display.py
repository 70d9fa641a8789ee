"""What the training loop shows: a rich live display on a terminal, plain lines in logs (CI, SLURM), tqdm on
request, and when the run ends a summary table and a sample from the final model."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Column, Table

from lmpt.console import console, is_main_process, print_whole
from lmpt.data.corpus import TokenCorpus
from lmpt.model.generate import sample
from lmpt.model.language_model import LanguageModel
from lmpt.rng import generator
from lmpt.tokenizer.base import Tokenizer
from lmpt.train.metrics import MetricsLog, Work
from lmpt.train.state import LoopState

if TYPE_CHECKING:
    from lmpt.config.budget import Budget
    from lmpt.train.budget import RunLength


_SHOWN = ("loss", "ppl", "acc", "nsp_acc", "lr", "grad_norm", "tokens_per_s", "mfu", "peak_memory_mb")
_SCALES = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""))


def format_rate(value: float) -> str:
    """A rate with two significant digits (three from 100 up) and a k / M / G / T suffix: 9.5, 10, 950, 1.6k, 16k,
    160k, 1.6M. A slow run's 10 tokens/s reads as 10, never as 0.0k."""
    i = next((i for i, (scale, _) in enumerate(_SCALES) if abs(value) >= scale), len(_SCALES) - 1)
    while True:
        scale, suffix = _SCALES[i]
        text = f"{value / scale:.1f}"
        if abs(float(text)) >= 10:
            text = f"{value / scale:.0f}"
        if abs(float(text)) >= 1000 and i > 0:  # 999.7 rounds to 1000: the next scale's 1k
            i -= 1
            continue
        return text.removesuffix(".0") + suffix


def format_duration(seconds: float) -> str:
    """Seconds as the console's ETA shows them: 0m07s, 12m30s, 2h05m."""
    whole = max(0, int(seconds))
    if whole >= 3600:
        return f"{whole // 3600}h{whole % 3600 // 60:02d}m"
    return f"{whole // 60}m{whole % 60:02d}s"


def _fmt(name: str, value: Any) -> str:
    if name == "lr":
        return f"lr {value:.2e}"
    if name == "tokens_per_s":
        return f"{format_rate(value)} tok/s"
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
    """The evaluation's figures; a standard error of 0 (an exact likelihood's) is left out as noise on the line."""
    shown = {k: v for k, v in record.items() if k.startswith("val_") and not (k.endswith("_stderr") and v == 0)}
    return " | ".join(_fmt(k, v) for k, v in shown.items())


class Display:
    """Plain lines: one per logged step and per evaluation (the mode for non-terminals). `length`: the run's length,
    whose budget (if any) the ETA follows."""

    def __init__(self, max_steps: int, length: RunLength | None = None) -> None:
        self.max_steps = max_steps
        self.length = length
        self.started = time.perf_counter()
        self.first_step: int | None = None
        self.spent_at_start = 0.0

    @property
    def budget(self) -> Budget | None:
        """The run's trainer.budget, or None."""
        return None if self.length is None else self.length.budget

    def eta_seconds(self, step: int) -> float | None:
        """Seconds left: with a time budget, the training time it has left (the run stops when it is spent, whatever
        the step count); with a token or FLOP budget, its unspent share at the rate this launch spends it; else the
        steps left at this launch's mean time per step. None until there is a rate to go by."""
        budget, length = self.budget, self.length
        if budget is not None and length is not None and budget.unit == "minutes":
            return max(0.0, 60 * budget.amount - length.work.seconds)
        if self.first_step is None or step <= self.first_step:
            return None
        elapsed = time.perf_counter() - self.started
        if budget is not None and length is not None:
            spent = length.spent_fraction()
            done = spent - self.spent_at_start
            return elapsed * max(0.0, 1.0 - spent) / done if done > 0 else None
        return elapsed / (step - self.first_step) * (self.max_steps - step)

    def eta(self, step: int) -> str:
        seconds = self.eta_seconds(step)
        return "?" if seconds is None else format_duration(seconds)

    def start(self, step: int) -> None:
        self.first_step = step
        self.started = time.perf_counter()
        self.spent_at_start = (
            self.length.spent_fraction() if self.length is not None and self.budget is not None else 0.0
        )

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

    def __init__(self, max_steps: int, length: RunLength | None = None) -> None:
        super().__init__(max_steps, length)
        self.progress = Progress(
            TextColumn("{task.description}", table_column=Column(no_wrap=True, min_width=len("evaluating"))),
            BarColumn(bar_width=20),
            MofNCompleteColumn(table_column=Column(no_wrap=True, min_width=2 * len(str(max_steps)) + 1)),
            # the display's own ETA: rich's would ignore a budget
            TextColumn("eta {task.fields[eta]}", table_column=Column(no_wrap=True, min_width=len("eta 00m00s"))),
            # a narrow terminal cuts the metrics, never the step or the ETA
            TextColumn("{task.fields[metrics]}", table_column=Column(no_wrap=True, overflow="ellipsis", ratio=1)),
            console=console,
        )
        self.task = self.progress.add_task(TRAINING, total=max_steps, metrics="", eta="?")
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
        self.progress.update(self.task, completed=step, description=TRAINING, metrics=self.metrics, eta=self.eta(step))

    def close(self) -> None:
        self.progress.stop()


class TqdmDisplay(Display):
    def __init__(self, max_steps: int, length: RunLength | None = None) -> None:
        super().__init__(max_steps, length)
        from tqdm import tqdm

        self.bar = tqdm(total=max_steps, dynamic_ncols=True)

    def start(self, step: int) -> None:
        super().start(step)
        self.bar.n = step
        self.bar.refresh()

    def log(self, step: int, record: dict) -> None:
        eta = f" | eta {self.eta(step)}" if self.budget is not None else ""  # tqdm's own ETA counts steps
        self.bar.set_postfix_str(format_record(record) + eta, refresh=False)

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


def make_display(mode: str, max_steps: int, length: RunLength | None = None) -> Display:
    """The display `trainer.progress` names (auto: rich on a terminal, else plain lines); silent off rank 0."""
    if not is_main_process():
        return SilentDisplay(max_steps, length)
    if mode == "auto":
        mode = "rich" if console.is_terminal else "plain"
    return {"rich": RichDisplay, "tqdm": TqdmDisplay, "plain": Display}[mode](max_steps, length)


def summary_table(rows: dict[str, str]) -> Table:
    table = Table(title="run summary", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    for key, value in rows.items():
        table.add_row(key, value)
    return table


def print_summary(
    metrics: MetricsLog, state: LoopState, work: Work, run_path: Path, wall: float, model: LanguageModel
) -> None:
    """The run summary table of a finished run (its `metrics`, loop `state` and `work`); `wall`: the run's wall time
    over every launch (lmpt.train.run.TrainResult.wall_s)."""
    records = [r for r in metrics.records() if "loss" in r]
    first, last = (records[0], records[-1]) if records else ({}, {})
    val = state.last_val
    rows = {
        "steps": str(state.step),
        "parameters": f"{model.num_parameters() / 1e6:.2f}M",
        "train loss": f"{first.get('loss', float('nan')):.4f} -> {last.get('loss', float('nan')):.4f}",
        "val loss / ppl": f"{val.get('val_loss', float('nan')):.4f} / {val.get('val_ppl', float('nan')):.2f}",
        **(
            {"val loss at the fixed rate": f"{val['val_fixed_loss']:.4f} (objective.eval_mask_prob)"}
            if "val_fixed_loss" in val
            else {}
        ),
        **({"val bits per byte": f"{val['val_bpb']:.4f} (held-out windows)"} if "val_bpb" in val else {}),
        "tokens seen / loss-bearing": f"{work.tokens:,} / {work.loss_tokens:,}",
        "training FLOPs": f"{work.flops:.3e}",
        "wall time / training": f"{wall:.1f}s / {work.seconds:.1f}s",
        "run directory": str(run_path),
    }
    print_whole(summary_table(rows))


PROMPT_END = "⟩"  # between the sample's prompt and what the model wrote


def print_sample(model: LanguageModel, tokenizer: Tokenizer, val_corpus: TokenCorpus, tokens: int, seed: int) -> None:
    """A continuation of the first held-out document's opening, ` ⟩ ` where the prompt ends (visible in plain text
    and logs too); each document it starts is a new line."""
    start, end = val_corpus.doc_span(0)
    prompt = [int(i) for i in val_corpus.window(start, min(8, end - start))]
    new = sample(model, prompt, tokens, generator=generator(seed, "sample"), vocab_size=tokenizer.vocab_size)
    ids = prompt + new
    documents: list[str] = []
    current: list[int] = []
    for token in ids:  # decode each document whole so pieces keep their leading spaces
        if token == tokenizer.special.eos:
            documents.append(tokenizer.decode(current))
            current = []
        else:
            current.append(token)
    text = "\n".join([*documents, tokenizer.decode(current)])
    head = tokenizer.decode(prompt)
    console.print(f"[bold]sample:[/] [cyan]{escape(head)}[/] {PROMPT_END}{escape(text[len(head) :])}")
