"""A run's downstream tasks (the `downstream` config group): read from its one list, `downstream.tasks` (the old
`choice_tasks` and `classification_tasks` after it, with a note), each by its kind (lmpt.downstream.task.read_task);
checked before training starts (`check_downstream`) and, once the tokenizer exists, against it before step 1
(`check_downstream_fits`), so a bad task costs no training; scored when the run ends (`score_downstream`); scored on
their fast subsets during training (`curve_scorer`); priced before the run (`scoring_flops`); and read by a quality
stage that decontaminates the training text against them (`quality_stage_for`).

When the run ends, the figures go into metrics.jsonl as one record at the last step, `downstream/TASK/FIGURE` (what
sweep summaries and lmpt-compare rank by), and each task's whole result into RUN/downstream/TASK.json.

Curves: every `downstream.score_every` steps (and at the last) each zero-shot task is scored on its fast subset on
the live model, the way it is scored when training ends, and the figures are logged as `curve/TASK/FIGURE` with their
95% interval. Fine-tuned tasks are not: a fine-tuning per point costs more than the training between points. A task's
fast subset is its bundled twin `bundled:NAME-fast` when lmpt ships one (bundled:blimp -> bundled:blimp-fast), else
the task itself; then at most `downstream.curve_items` of its items, drawn once with a fixed seed: the same items at
every step, in every run. The training layer takes the scorer as a callable and calls it with the random streams,
gradients and train mode set aside (lmpt.train.evaluation), so scoring changes no training number.

Cost: the tokens scoring passes through a model, each task counting its own (`Task.scoring_tokens`; texts counted in
characters, lmpt.downstream.task.CHARS_PER_TOKEN to a token, as no tokenizer exists before the run), then FLOPs at the
model's forward cost per token, the rate lmpt plans training with. Each model scored (the run's, and its untrained
control) counts once; curve points count their fast subsets every downstream.score_every steps."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig
from rich.markup import escape
from rich.table import Table

from lmpt.config.quality_schema import QualityConfig, check_quality
from lmpt.config.schema import OLD_TASK_KEYS, DownstreamConfig
from lmpt.config.schema import settings as schema_settings
from lmpt.console import console, print_whole, warn
from lmpt.downstream.bundled import BUNDLED_PREFIX, resolve_task
from lmpt.downstream.figures import ACCURACY, METRIC_PREFIX, curve_key, metric_key, task_figure
from lmpt.downstream.kinds.zero_shot import ZeroShotTask
from lmpt.downstream.records import ScoringProgress, record_path
from lmpt.downstream.significance import high_key, low_key
from lmpt.downstream.task import RunShape, Scoring, ScoringRun, Task, kind_of, read_task
from lmpt.errors import LmptError
from lmpt.objectives.base import Objective, Reading
from lmpt.objectives.schema import ObjectiveConfig
from lmpt.rundir.best import BEST_DIR, BEST_RECORD
from lmpt.rundir.directory import METRICS_FILE
from lmpt.rundir.trained import Trained
from lmpt.tokenizer.base import Tokenizer
from lmpt.train.metrics import MetricsLog

if TYPE_CHECKING:
    from lmpt.model.language_model import LanguageModel
    from lmpt.quality.decontamination import TaskItems
    from lmpt.quality.stage import QualityStage

OLD_KEYS_NOTE = (
    "downstream.choice_tasks and downstream.classification_tasks are now one list, downstream.tasks=[...] (each "
    "task's kind is told by its file or folder): the old keys still work for a while"
)


@dataclass(frozen=True)
class TaskEntry:
    """One task as the downstream section names it: the key (`downstream.tasks[0]`), the spec, and whether the key
    holds only zero-shot (True) or fine-tuned (False) tasks, as the old keys did (None: any kind)."""

    key: str
    spec: str
    zero_shot: bool | None = None

    def read(self, how: Scoring) -> Task:
        """The task read by its kind; a problem is one LmptError naming the key."""
        try:
            kind = kind_of(self.spec, self.zero_shot)
            if kind.zero_shot:  # a zero-shot file's problems name no key of their own
                return kind.read(self.spec, self.key, how)
        except LmptError as exc:
            raise LmptError(f"{self.key}: {exc}") from None
        return kind.read(self.spec, self.key, how)

    def name(self) -> str:
        """The task's name, without reading its examples."""
        return kind_of(self.spec, self.zero_shot).named(self.spec, self.key)

    def is_zero_shot(self) -> bool:
        """Whether the task is scored zero-shot (its kind read from its form or its first record)."""
        return self.zero_shot if self.zero_shot is not None else kind_of(self.spec).zero_shot


def task_entries(downstream: DownstreamConfig) -> list[TaskEntry]:
    """Every task `downstream` names, in scoring order: downstream.tasks, then the old keys' (choice_tasks zero-shot,
    classification_tasks fine-tuned)."""
    entries = [TaskEntry(f"downstream.tasks[{i}]", str(t)) for i, t in enumerate(downstream.tasks)]
    for old, zero_shot in zip(OLD_TASK_KEYS, (True, False), strict=True):
        entries += [
            TaskEntry(f"downstream.{old}[{i}]", str(t), zero_shot) for i, t in enumerate(getattr(downstream, old))
        ]
    return entries


def run_tasks(downstream: DownstreamConfig, how: Scoring) -> list[Task]:
    """Every task of `downstream`, read to be scored as `how` says (`task_entries`)."""
    return [entry.read(how) for entry in task_entries(downstream)]


def _names_unique(names: list[str]) -> None:
    doubled = sorted({n for n in names if names.count(n) > 1})
    if doubled:
        raise LmptError(f"downstream tasks share the name {doubled[0]}: each task needs a name of its own")


@functools.cache
def _note_old_keys() -> None:
    """The old task keys' note, once a process (a study checks its downstream section once per objective)."""
    warn(escape(OLD_KEYS_NOTE))


def check_downstream(downstream: DownstreamConfig, objective: type[Objective], seq_len: int, max_seq_len: int) -> None:
    """Every task of the `downstream` section is readable and named uniquely, and the run's `objective` can score
    it (before any training); its numbers and mode are checked with the rest of the config (lmpt.config.validate).
    Each task is checked by its kind (`Task.check`: a fine-tuned task as fine-tuning checks it). Zero-shot tasks score
    tokens: an objective whose model keeps no trained token head (electra) is refused them, the same rule lmpt-eval
    follows; whether their choices fit the model is checked once the tokenizer exists (`check_downstream_fits`). The
    old task keys are read with a one-line note."""
    if any(getattr(downstream, old) for old in OLD_TASK_KEYS):
        _note_old_keys()
    tasks = run_tasks(downstream, Scoring.of(downstream))
    zero_shot = next((t for t in tasks if t.zero_shot), None)
    if zero_shot is not None and objective.token_head_missing:
        raise LmptError(
            f"{zero_shot.key} ({zero_shot.name}) is scored zero-shot by the model's token head, and "
            f"{objective.token_head_missing}: drop the zero-shot tasks (fine-tuned tasks fine-tune the discriminator)"
        )
    for task in tasks:
        task.check(RunShape(seq_len, max_seq_len))
    _names_unique([t.name for t in tasks])
    for task in tasks:
        record_path(Path("."), task.name)  # a name that cannot be a file is refused now, not after training


def check_downstream_fits(
    downstream: DownstreamConfig, max_seq_len: int, tokenizer: Tokenizer, objective: Objective
) -> None:
    """Every choice of the zero-shot tasks fits a model of `max_seq_len` as the run's `objective` frames it with
    its `tokenizer` (`Task.check` with the run's framing): run once the tokenizer exists, before step 1
    (lmpt.train.inputs.prepare_inputs), so a choice too long costs no training."""
    entries = [e for e in task_entries(downstream) if e.is_zero_shot()]
    if not entries:
        return
    run = RunShape(max_seq_len, max_seq_len, tokenizer, type(objective), objective.arch)
    for entry in entries:
        task = entry.read(Scoring())  # a problem reading it names its key already
        try:
            task.check(run)
        except LmptError as exc:
            raise LmptError(f"{entry.key}: {exc}") from None


def score_downstream(
    downstream: DownstreamConfig, run_dir: Path, step: int, device: str = "cpu", progress: ScoringProgress | None = None
) -> dict[str, float]:
    """Score the final model of `run_dir` on `device` (cpu or cuda) on every task of `downstream`; log the figures
    at `step`, in place of those an earlier scoring of `step` logged, and print them. `progress`: the tasks a scoring
    stopped at `step` recorded (kept, not scored again) and those recorded so far (lmpt.downstream.records).
    Returns the logged figures (empty when no task is named)."""
    how = Scoring.of(downstream, device)
    tasks = run_tasks(downstream, how)
    if not tasks:
        return {}
    from lmpt.rundir.trained import load_trained

    progress = progress or ScoringProgress()
    weights = run_dir / BEST_DIR if downstream.weights == "best" else run_dir  # one rule for every task
    trained = functools.cache(lambda: load_trained(weights, how.device))  # none if every task's record is kept
    if downstream.weights == "best":
        console.print(f"scoring the best weights: {_best_text(run_dir)}")
    figures: dict[str, float] = {}
    for task in tasks:
        record = progress.kept_record(run_dir, task.name) or progress.write_record(
            run_dir, task.name, task.score(trained()).run_record(task.name, downstream.weights)
        )
        logged = task.result_type.from_json(record).logged()
        figures |= {metric_key(task.name, k): v for k, v in logged.items() if v is not None}
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
    print_whole(table)


FAST_SUFFIX = "-fast"
LIVE_WEIGHTS = Path("(the model in training)")
"""What a live model's `Trained.weights` names (a path only in messages)."""


def fast_twin(task: str) -> str:
    """`bundled:NAME-fast` when lmpt ships it beside `bundled:NAME`, else `task` itself."""
    if not task.startswith(BUNDLED_PREFIX) or task.removesuffix(".jsonl").endswith(FAST_SUFFIX):
        return task
    twin = task.removesuffix(".jsonl") + FAST_SUFFIX
    try:
        resolve_task(twin)
    except LmptError:
        return task
    return twin


def fast_subsets(downstream: DownstreamConfig, how: Scoring) -> list[ZeroShotTask]:
    """Every zero-shot task's fast subset: its fast twin's items, at most downstream.curve_items of them."""
    subsets = []
    for entry in task_entries(downstream):
        if entry.is_zero_shot():
            task = TaskEntry(entry.key, fast_twin(entry.spec), True).read(how)
            assert isinstance(task, ZeroShotTask)
            subsets.append(task.subset(int(downstream.curve_items)))
    return subsets


def curve_figures(task: ZeroShotTask, figures: dict) -> dict[str, float]:
    """What a curve point logs of a zero-shot result: the figures logged after training, accuracy's interval and n."""
    logged = dict(task.result_type.from_json(figures).logged())
    for key in (low_key(ACCURACY), high_key(ACCURACY), "n"):
        if figures.get(key) is not None:
            logged[key] = figures[key]
    return logged


@dataclass(frozen=True)
class TaskCurves:
    """The zero-shot tasks' fast subsets, read once, and how to score them on a live model (`__call__`)."""

    every: int
    """downstream.score_every: steps between curve points."""
    tasks: tuple[tuple[str, ZeroShotTask], ...]
    """(name in curve/NAME/..., its fast subset)."""
    config: DictConfig
    """The run's config, as a Trained model carries it."""

    def __call__(self, model: LanguageModel, objective: Objective) -> dict[str, float]:
        """`curve/TASK/FIGURE` of every task on `model` (a LanguageModel in eval mode) trained by `objective`."""
        trained = Trained(model, objective.tokenizer, self.config, objective.arch, objective.name, LIVE_WEIGHTS)
        figures: dict[str, float] = {}
        for name, task in self.tasks:
            figures |= {curve_key(name, k): v for k, v in curve_figures(task, task.evaluate(trained)).items()}
        return figures


def curve_scorer(downstream: DownstreamConfig, config: DictConfig) -> TaskCurves | None:
    """The scorer of `downstream`'s zero-shot tasks every downstream.score_every steps, or None when it is 0 (or no
    task is zero-shot); each fast subset is read now, before training."""
    if not downstream.score_every:
        return None
    subsets: dict[str, ZeroShotTask] = {}  # two tasks with one twin are scored once
    for task in fast_subsets(downstream, Scoring(batch_size=int(downstream.batch_size), hidden=True)):
        subsets.setdefault(task.name, task)
    return TaskCurves(int(downstream.score_every), tuple(subsets.items()), config) if subsets else None


def scoring_tokens(run: ScoringRun) -> float:
    """Tokens every downstream task of `run` passes through the models scored, when the run ends."""
    return sum(task.scoring_tokens(run) for task in run_tasks(run.downstream, Scoring.of(run.downstream))) * run.models


def curve_tokens(run: ScoringRun, steps: int) -> float:
    """Tokens the curve points of a run of `steps` steps pass through it: each zero-shot task's fast subset every
    downstream.score_every steps (the last step's point is the end-of-run scoring's)."""
    every = int(run.downstream.score_every or 0)
    if every <= 0 or steps <= every:
        return 0.0
    one = replace(run, models=1)  # a curve point scores the run's model alone
    subsets = fast_subsets(run.downstream, Scoring())
    return sum(task.scoring_tokens(one) for task in subsets) * ((steps - 1) // every)


def scoring_flops(
    downstream: DownstreamConfig, objective: Objective, objective_cfg: ObjectiveConfig, model: Any, steps: int
) -> float:
    """FLOPs a run of `objective` (built, with its config `objective_cfg`) training `model` for `steps` steps spends
    on `downstream`'s tasks: its curve points and its scoring when it ends, the untrained control's included."""
    if not task_entries(downstream):
        return 0.0
    reading = objective.reading(objective.arch)
    run = ScoringRun(
        arch=objective.arch,
        seq_len=objective.seq_len,
        downstream=downstream,
        row_per_scored_token=reading is Reading.PSEUDO_LIKELIHOOD,
        rows_per_choice=int(getattr(objective_cfg, "score_draws", 1) or 1) if reading is Reading.OWN else 1,
        models=2 if downstream.control == "scratch" else 1,
    )
    forward_per_token = model.flops_per_example(run.seq_len, 0, 1.0) / (3 * run.seq_len)  # a third of training's
    return (scoring_tokens(run) + curve_tokens(run, steps)) * forward_per_token


def quality_stage_for(quality: QualityConfig, downstream: DownstreamConfig) -> QualityStage | None:
    """The quality stage `quality` (the config group) asks for, None for quality=none: its settings checked and,
    when it decontaminates, every task read now, so a bad value or an unreadable task stops the command before any
    cache is touched."""
    settings = schema_settings(quality, QualityConfig)
    check_quality(settings)
    if not settings.active:
        return None
    from lmpt.quality.stage import QualityStage  # datatrove: only for a run that filters its text

    tasks = []
    if settings.decontaminate:
        entries = [(e.key, e.spec) for e in task_entries(downstream)]
        entries += [(f"quality.decontaminate_tasks[{i}]", str(t)) for i, t in enumerate(settings.decontaminate_tasks)]
        tasks = [read_task_items(spec, key) for key, spec in entries]
    return QualityStage(settings, tasks)


def read_task_items(task: str, key: str) -> TaskItems:
    """A task's texts, as its kind gives them (`Task.texts`). A task that cannot be read is one LmptError naming
    `key`."""
    try:
        return read_task(task, key).texts()
    except LmptError as exc:
        raise LmptError(f"{key}: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise LmptError(
            f"{key}={task} cannot be read ({exc.__class__.__name__}: {exc}): fix the file or drop it"
        ) from None
