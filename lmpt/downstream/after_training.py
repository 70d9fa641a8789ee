"""Downstream scoring when a run ends (the `downstream` config group): the multiple-choice and minimal-pair tasks
zero-shot (lmpt.downstream.kinds.zero_shot) and the classification tasks fine-tuned
(lmpt.downstream.finetuning.finetune) on the final model. The figures go into metrics.jsonl as one record at the last
step, `downstream/TASK/FIGURE` (what sweep summaries and lmpt-compare rank by), and each task's whole result into
RUN/downstream/TASK.json. `check_downstream` reads and checks every task before training starts, and
`check_downstream_fits` every choice against the run's tokenizer once it exists (before step 1), so a bad task costs no
training."""

from __future__ import annotations

import functools
import json
from pathlib import Path

from rich.table import Table

from lmpt.config.schema import DownstreamConfig
from lmpt.console import console
from lmpt.downstream.codec import record_path
from lmpt.downstream.figures import METRIC_PREFIX, metric_key, task_figure
from lmpt.downstream.kinds.registry import fine_tuned_kind
from lmpt.downstream.kinds.zero_shot import check_zero_shot_fits, logged_zero_shot, read_zero_shot, score_zero_shot
from lmpt.downstream.preemption import ScoringProgress
from lmpt.downstream.tasks.choice_tasks import task_name
from lmpt.errors import LmptError
from lmpt.objectives.base import Objective
from lmpt.rundir.best import BEST_DIR, BEST_RECORD
from lmpt.rundir.directory import METRICS_FILE
from lmpt.tokenizer.base import Tokenizer
from lmpt.train.metrics import MetricsLog


def _names_unique(names: list[str]) -> None:
    doubled = sorted({n for n in names if names.count(n) > 1})
    if doubled:
        raise LmptError(f"downstream tasks share the name {doubled[0]}: each task needs a name of its own")


def check_downstream(downstream: DownstreamConfig, objective: type[Objective], seq_len: int, max_seq_len: int) -> None:
    """Every task of the `downstream` section is readable and named uniquely, and the run's `objective` can score
    it (before any training); its numbers and mode are checked with the rest of the config (lmpt.config.validate).
    A fine-tuned task is checked by its kind as fine-tuning checks it (`FineTunedKind.check`). Zero-shot tasks score
    tokens: an objective whose model keeps no trained token head (electra) is refused them, the same rule lmpt-eval
    follows; whether their choices fit the model is checked once the tokenizer exists (`check_downstream_fits`)."""
    if downstream.choice_tasks and objective.token_head_missing:
        raise LmptError(
            f"downstream.choice_tasks are scored zero-shot by the model's token head, and "
            f"{objective.token_head_missing}: drop downstream.choice_tasks (downstream.classification_tasks "
            "fine-tune the discriminator)"
        )
    for i, task in enumerate(downstream.choice_tasks):
        try:
            read_zero_shot(str(task))
        except LmptError as exc:
            raise LmptError(f"downstream.choice_tasks[{i}]: {exc}") from None
    names = [task_name(str(t)) for t in downstream.choice_tasks]
    for i, task in enumerate(map(str, downstream.classification_tasks)):
        key, kind = f"downstream.classification_tasks[{i}]", fine_tuned_kind(task)
        found = kind.find(task, key)
        kind.check(kind.options(downstream, found, "cpu"), key, seq_len, max_seq_len)
        names.append(found.name)
    _names_unique(names)
    for name in names:
        record_path(Path("."), name)  # a name that cannot be a file is refused now, not after training


def check_downstream_fits(
    downstream: DownstreamConfig, max_seq_len: int, tokenizer: Tokenizer, objective: Objective
) -> None:
    """Every choice of the zero-shot tasks fits a model of `max_seq_len` as the run's `objective` frames it with
    its `tokenizer` (lmpt.downstream.kinds.zero_shot.check_zero_shot_fits): run once the tokenizer exists, before step 1
    (lmpt.train.inputs.prepare_inputs), so a choice too long costs no training."""
    if not downstream.choice_tasks:
        return
    from lmpt.downstream.zero_shot.multiple_choice import RunFraming  # torch-heavy: only when a task is named

    run = RunFraming(tokenizer, type(objective), objective.arch, max_seq_len)
    for i, task in enumerate(map(str, downstream.choice_tasks)):
        try:
            check_zero_shot_fits(run, read_zero_shot(task))
        except LmptError as exc:
            raise LmptError(f"downstream.choice_tasks[{i}]: {exc}") from None


def score_downstream(
    downstream: DownstreamConfig, run_dir: Path, step: int, device: str = "cpu", progress: ScoringProgress | None = None
) -> dict[str, float]:
    """Score the final model of `run_dir` on `device` (cpu or cuda) on every task of `downstream`; log the figures
    at `step`, in place of those an earlier scoring of `step` logged, and print them. `progress`: the tasks a scoring
    stopped at `step` recorded (kept, not scored again) and those recorded so far (lmpt.downstream.preemption).
    Returns the logged figures (empty when no task is named)."""
    if not downstream.choice_tasks and not downstream.classification_tasks:
        return {}
    from lmpt.rundir.trained import load_trained

    progress = progress or ScoringProgress()
    weights = run_dir / BEST_DIR if downstream.weights == "best" else run_dir  # one rule for every task
    trained = functools.cache(lambda: load_trained(weights, device if device == "cuda" else "cpu"))  # none if all kept
    if downstream.weights == "best":
        console.print(f"scoring the best weights: {_best_text(run_dir)}")
    figures: dict[str, float] = {}
    for task in map(str, downstream.choice_tasks):
        name = task_name(task)
        result = progress.kept_record(run_dir, name) or progress.write_record(
            run_dir,
            name,
            {
                "task": name,
                "weights": downstream.weights,
                **score_zero_shot(trained(), read_zero_shot(task), downstream.batch_size, False, downstream.control),
            },
        )
        figures |= {metric_key(name, k): v for k, v in logged_zero_shot(result).items() if v is not None}
    for i, task in enumerate(map(str, downstream.classification_tasks)):
        kind = fine_tuned_kind(task)
        spec = kind.find(task, f"downstream.classification_tasks[{i}]")
        options = kind.options(downstream, spec, device if device == "cuda" else "cpu")
        result = progress.kept_record(run_dir, spec.name) or progress.write_record(
            run_dir, spec.name, {**kind.score(trained(), options), "weights": downstream.weights}
        )
        figures |= {metric_key(spec.name, k): v for k, v in kind.logged(result).items() if v is not None}
    metrics = MetricsLog(run_dir / METRICS_FILE)
    metrics.drop(lambda r: r["step"] == step and any(k.startswith(METRIC_PREFIX) for k in r))  # a stopped scoring's
    metrics.write({"step": step, **figures})
    _print_figures(figures)
    return figures


def _best_text(run_dir: Path) -> str:
    """RUN/best's step and val_loss, as best.json records them."""
    record = json.loads((run_dir / BEST_DIR / BEST_RECORD).read_text())
    return f"step {record['step']}, val_loss {record['val_loss']:.4f} (RUN/best)"


def _print_figures(figures: dict[str, float]) -> None:
    table = Table(title="downstream (logged to metrics.jsonl)", title_justify="left")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for key, value in figures.items():
        table.add_row(task_figure(key), f"{value:.4f}")  # figures without a value (a std over one seed) are not logged
    console.print(table)
