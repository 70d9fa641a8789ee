"""A fine-tuning's result (`FineTunedResult`), typed, with its one JSON codec: what was fine-tuned and how (the task,
the run, the mode, the examples, the trivial baseline), the run's model (its recipe and search, its figures per seed
and their summary: lmpt.downstream.seed_figures), the task's own metrics, and with control=scratch the control, the
bag-of-words floor and the gains over the control. `of` builds it from a fine-tuning (lmpt.downstream.finetune
.FineTuning), which also hands it the predictions by model and split (never written: a benchmark's files read them);
`to_json` writes the record, `from_json` reads one back; `render` prints it as lmpt-finetune shows it (the figures
per seed, the recipe its search chose, and with control=scratch the run's model against its controls, with the gain
and its interval).

The record's keys, in the order written: `kind`, `record_version`, `task`, `objective`, `arch`, `weights`, `mode`,
`pooling`, `seeds`, `classes`, `train_examples`, `max_train_examples` (when capped), `dev_examples`, `test_examples`
(with a test split), the baseline (`majority_accuracy`, a regression's `mean_baseline_mse`), `epochs`, `steps`, `lr`,
`batch_size`, `seq_len`, `precision`, each figure's `_mean` and `_std`, `per_seed`, `examples_per_s`, `search`,
`glue_metrics` (a task's own metrics), `control` with `scratch`, `bag_of_words` and `gain`, and `record` (a hand run's
file). A record written before (no `kind`, a key of another lmpt, a value of the wrong type) reads back: what does not
read as its field is kept as written (`kept`) and written back the same, so `to_json(from_json(raw)) == raw`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from rich.table import Table

from lmpt.console import console, print_whole
from lmpt.downstream.figures import (
    BAG_OF_WORDS,
    GAIN,
    GLUE_METRICS,
    GLUE_SCORE,
    GLUE_SCORE_MEAN,
    MAJORITY_ACCURACY,
    MEAN_BASELINE_MSE,
    SCRATCH,
    SEED_FIGURES,
    mean_of,
    std_of,
)
from lmpt.downstream.options import MODE_MEANINGS
from lmpt.downstream.seed_figures import (
    Floor,
    Recipe,
    ScratchFigures,
    Search,
    TunedFigures,
    is_int,
    is_number,
    seeds_of,
    summary_of,
)
from lmpt.downstream.significance import Gain, describe_gain
from lmpt.downstream.task import RECORD_VERSION, Result

if TYPE_CHECKING:
    from typing_extensions import Self

    from lmpt.downstream.finetune import FineTuning
    from lmpt.downstream.seeds import Tuned

BASELINES = {MAJORITY_ACCURACY: "majority class", MEAN_BASELINE_MSE: "mean prediction"}
"""The trivial baseline's figure of a record, and its row's name: a classification's, or a regression's."""

Predictions = dict[str, dict[str, list[list]]]
"""By model ("pretrained", "scratch", "bag_of_words") and split (its figures' prefix, and "unlabelled"), each seed's
prediction of each item (a class id, or a number; the floor's one fit as one seed)."""


class _Fields:
    """Takes a record's keys into typed fields: a key whose value is not its field's type stays in `rest`."""

    def __init__(self, raw: dict[str, Any]) -> None:
        self.rest = dict(raw)

    def take(self, key: str, check: Any) -> Any:
        value = self.rest.get(key)
        if key in self.rest and check(value):
            del self.rest[key]
            return value
        return None

    def piece(self, key: str, decode: Any) -> Any:
        found = decode(self.rest[key]) if key in self.rest else None
        if found is not None:
            del self.rest[key]
        return found


def _text(value: object) -> bool:
    return isinstance(value, str)


def _texts(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


@dataclass(frozen=True)
class FineTunedResult(Result):
    """A fine-tuning's result, typed (module docstring). A kind names the figures it logs, its headline figure and
    the figure its gain over the control is of; a field None was not in the record it was read from."""

    logged_figures: ClassVar[tuple[str, ...]] = ()
    control_figures: ClassVar[tuple[str, str, str]] = ("", "", "")
    """The names, in metrics.jsonl, of the control's headline, the gain over it and the floor's headline."""
    headline_figure: ClassVar[str] = ""
    """The figure the recipe search picks by and the control's and floor's logged figures are of."""
    gain_figure: ClassVar[str] = ""

    name: str | None = None
    """The task's name (`task`)."""
    objective: str | None = None
    arch: str | None = None
    weights: str | None = None
    """The weights fine-tuned: a path (a hand run), or `last` or `best` (a run's own scoring)."""
    mode: str | None = None
    seeds: int | None = None
    classes: list[str] | None = None
    train_examples: int | None = None
    max_train_examples: int | None = None
    dev_examples: int | None = None
    test_examples: int | None = None
    baseline: dict[str, float] = field(default_factory=dict)
    epochs: int | None = None
    batch_size: int | None = None
    seq_len: int | None = None
    precision: str | None = None
    model: TunedFigures | None = None
    """The run's model: its recipe, each seed's figures and their summary."""
    examples_per_s: float | None = None
    metrics: tuple[str, ...] = ()
    """The task's own metrics (a GLUE task's official ones: `glue_metrics`), with its score (`glue_score`)."""
    scratch: ScratchFigures | None = None
    floor: Floor | None = None
    gain_of: dict[str, Gain] | None = None
    """By figure, the gain over the control (`gain`)."""
    record_file: str | None = None
    """A hand run's record file (`record`)."""
    record_version: int | None = RECORD_VERSION
    """None: a record written before records named their kind (it is written back without)."""
    kept: dict[str, Any] = field(default_factory=dict)
    """The record's keys that read as no field, as written."""
    predictions: Predictions | None = field(default=None, compare=False, repr=False)
    """What the fine-tuning predicted (not in the record): None when read back."""

    @classmethod
    def of(cls, tuning: FineTuning) -> Self:
        """The result of `tuning`, just fine-tuned."""
        task, o, control = tuning.task, tuning.options, tuning.control
        runs = tuning.pretrained.runs
        return cls(
            name=task.name,
            objective=tuning.objective,
            arch=tuning.arch,
            weights=tuning.weights,
            mode=o.mode,
            seeds=o.seeds,
            classes=task.classes,
            train_examples=len(task.train),
            max_train_examples=o.max_train_examples,
            dev_examples=len(task.dev),
            test_examples=len(task.test) if task.test is not None else None,
            baseline=tuning.baseline,
            epochs=o.epochs,
            batch_size=o.batch_size,
            seq_len=tuning.seq_len,
            precision=tuning.precision,
            model=_figures_of(tuning.pretrained),
            examples_per_s=runs.examples / runs.seconds if runs.seconds > 0 else None,
            metrics=tuning.metrics,
            scratch=ScratchFigures(
                control.init_seed, _figures_of(control.tuned), control.key, control.shared, control.entry_digest
            )
            if control is not None
            else None,
            floor=Floor(control.floor["method"], {k: v for k, v in control.floor.items() if k != "method"})
            if control is not None
            else None,
            gain_of=control.gains if control is not None else None,
            predictions=tuning.predictions(),
        )

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Self:
        fields = _Fields(raw)
        fields.take("kind", lambda v: v == cls.kind)
        version = fields.take("record_version", is_int)
        got = {
            "name": fields.take("task", _text),
            **{k: fields.take(k, _text) for k in ("objective", "arch", "weights", "mode", "precision")},
            "classes": fields.take("classes", _texts),
            "baseline": {k: fields.take(k, is_number) for k in BASELINES if k in raw},
            **{
                k: fields.take(k, is_int)
                for k in ("seeds", "train_examples", "max_train_examples", "dev_examples", "test_examples")
            },
            **{k: fields.take(k, is_int) for k in ("epochs", "batch_size", "seq_len")},
            "examples_per_s": fields.take("examples_per_s", is_number),
            "metrics": tuple(fields.take(GLUE_METRICS, _texts) or ()),
            "record_file": fields.take("record", _text),
        }
        got["baseline"] = {k: v for k, v in got["baseline"].items() if v is not None}
        lr, pooling, steps = raw.get("lr"), raw.get("pooling"), raw.get("steps")
        seeds = seeds_of(raw.get("per_seed"))
        if is_number(lr) and isinstance(pooling, str) and is_int(steps) and seeds is not None:
            for key in ("lr", "pooling", "steps", "per_seed"):
                del fields.rest[key]
            search = fields.piece("search", Search.from_json)
            summary = {k: fields.rest.pop(k) for k in summary_of(fields.rest)}
            got["model"] = TunedFigures(Recipe(lr, pooling, steps, search), summary, seeds)  # type: ignore[arg-type]
        if fields.rest.get("control") == SCRATCH and {SCRATCH, BAG_OF_WORDS, GAIN} <= set(fields.rest):
            scratch, floor = ScratchFigures.from_json(raw[SCRATCH]), Floor.from_json(raw[BAG_OF_WORDS])
            gains = raw[GAIN]
            decoded = {k: Gain.from_json(v) for k, v in gains.items()} if isinstance(gains, dict) else None
            if scratch is not None and floor is not None and decoded is not None:
                gain_of = {k: g for k, g in decoded.items() if g is not None}
                if {k: g.to_json() for k, g in gain_of.items()} == gains:
                    for key in ("control", SCRATCH, BAG_OF_WORDS, GAIN):
                        del fields.rest[key]
                    got |= {"scratch": scratch, "floor": floor, "gain_of": gain_of}
        return cls(**got, record_version=version, kept=fields.rest)

    def to_json(self) -> dict[str, Any]:
        model = self.model
        recipe = model.recipe if model is not None else None
        head = {
            **({"kind": self.kind, "record_version": self.record_version} if self.record_version is not None else {}),
            "task": self.name,
            "objective": self.objective,
            "arch": self.arch,
            "weights": self.weights,
            "mode": self.mode,
            "pooling": recipe.pooling if recipe is not None else None,
            "seeds": self.seeds,
            "classes": self.classes,
            "train_examples": self.train_examples,
            "max_train_examples": self.max_train_examples,
            "dev_examples": self.dev_examples,
            "test_examples": self.test_examples,
            **self.baseline,
            "epochs": self.epochs,
            "steps": recipe.steps if recipe is not None else None,
            "lr": recipe.lr if recipe is not None else None,
            "batch_size": self.batch_size,
            "seq_len": self.seq_len,
            "precision": self.precision,
        }
        tail: dict[str, Any] = {
            "per_seed": [s.to_json() for s in model.seeds] if model is not None else None,
            "examples_per_s": self.examples_per_s,
            "search": recipe.search.to_json() if recipe is not None and recipe.search is not None else None,
            GLUE_METRICS: list(self.metrics) if self.metrics else None,
        }
        if self.scratch is not None and self.floor is not None and self.gain_of is not None:
            tail |= {
                "control": SCRATCH,
                SCRATCH: self.scratch.to_json(),
                BAG_OF_WORDS: self.floor.to_json(),
                GAIN: {k: g.to_json() for k, g in self.gain_of.items()},
            }
        tail["record"] = self.record_file
        given = lambda part: {k: v for k, v in part.items() if v is not None}
        summary = model.summary if model is not None else {}  # a std over one seed is written as null
        return given(head) | summary | given(tail) | self.kept

    def run_record(self, name: str, weights: str) -> dict[str, Any]:
        return {**self.to_json(), "weights": weights}

    def logged(self) -> dict[str, float]:
        """What a fine-tuning logs to metrics.jsonl after training: the kind's `logged_figures` and, with a scratch
        control, its `control_figures` (the control's dev headline, the gain over it in `gain_figure`, the floor's
        headline), then the task's own metrics."""
        held: dict[str, Any] = {**self.baseline, **(self.model.summary if self.model is not None else {})}
        figures = {k: held[k] for k in self.logged_figures if k in held}
        if self.scratch is not None and self.floor is not None and self.gain_of is not None:
            scratch, gain, floor = self.control_figures
            figures[scratch] = self.scratch.model.mean(self.headline_figure)
            figures[gain] = self.gain_of[self.gain_figure].gain
            figures[floor] = self.floor.figures[self.headline_figure]
        return figures | self.official_logged()

    def official_logged(self) -> dict[str, float]:
        """The task's own metrics (means over seeds: f1_mean, mcc_mean, matched_accuracy_mean ...), its score's mean
        and std (glue_score_mean ranks runs) and, with a scratch control, the control's and the floor's score;
        nothing for a task scored by its kind's figures alone."""
        if not self.metrics or self.model is None:
            return {}
        summary = self.model.summary
        figures = {mean_of(m): summary.get(mean_of(m)) for m in (*self.metrics, GLUE_SCORE)}
        figures[std_of(GLUE_SCORE)] = summary.get(std_of(GLUE_SCORE))
        if self.scratch is not None and self.floor is not None:
            figures[f"{SCRATCH}_{GLUE_SCORE_MEAN}"] = self.scratch.model.summary.get(GLUE_SCORE_MEAN)
            figures[f"bow_{GLUE_SCORE}"] = self.floor.figures.get(GLUE_SCORE)
        return {k: v for k, v in figures.items() if v is not None}  # a std over one seed is not logged

    def render(self) -> None:
        """The figures as lmpt-finetune prints them (`render_result`)."""
        render_result(self)


def _figures_of(tuned: Tuned) -> TunedFigures:
    """One model just fine-tuned, as its record keeps it."""
    return TunedFigures.of(Recipe(tuned.lr, tuned.pooling, tuned.steps, tuned.search), tuned.runs.per_seed)


def _cell(mean: float | None, std: float | None) -> str:
    return f"{mean:.4f}" if std is None else f"{mean:.4f} ± {std:.4f}"


def render_result(result: FineTunedResult) -> None:
    """The figures as a rich table (one row per figure, mean ± std then each seed), the recipe the search chose, and
    with a scratch control the model against its controls."""
    model, mode = result.model, str(result.mode)
    assert model is not None, "a result just fine-tuned has its model's figures"
    recipe = model.recipe
    title = (
        f"lmpt-finetune {result.name}: {result.objective} {result.arch}, "
        f"mode={mode} ({MODE_MEANINGS[mode]}), pooling {recipe.pooling}, "
        f"{result.seeds} seed(s) x {recipe.steps} steps"
    )
    table = Table(title=title, title_justify="left")
    table.add_column("figure")
    table.add_column("mean ± std", justify="right")
    for seed in model.seeds:
        table.add_column(f"seed {seed.seed}", justify="right")
    for prefix, split in (("", "dev"), ("test_", "test")):
        for figure in SEED_FIGURES:
            key = prefix + figure
            if model.mean(key) is not None:
                seeds = [f"{v:.4f}" for v in model.per_seed(key)]
                table.add_row(f"{split} {figure}", _cell(model.mean(key), model.std(key)), *seeds)
    table.add_row("train loss", "", *(f"{s.train_loss:.4f}" for s in model.seeds))
    print_whole(table)
    baseline = (
        f"dev mean-prediction MSE {result.baseline[MEAN_BASELINE_MSE]:.4f}"
        if MEAN_BASELINE_MSE in result.baseline
        else f"classes {result.classes} · dev majority-class accuracy {result.baseline[MAJORITY_ACCURACY]:.4f}"
    )
    console.print(
        f"{baseline} · {result.train_examples:,} train / {result.dev_examples:,} dev examples · "
        f"{result.precision} · record {result.record_file} (a hand run: the run's own records in RUN/downstream/ "
        "are left as they are)"
    )
    if recipe.search is not None:
        console.print(describe_search("pre-trained", model))
    if result.scratch is not None:
        render_control(result)


def describe_search(name: str, model: TunedFigures) -> str:
    """One line: the recipe a search chose and every candidate's figure on the held-back slice."""
    recipe = model.recipe
    search = recipe.search
    assert search is not None, "a searched recipe"
    figure = search.figure
    tried = ", ".join(f"{c.lr:g}/{c.pooling} {c.figures[figure]:.3f}" for c in search.candidates)
    return (
        f"{name} recipe searched on {search.held_out} examples held back from train (never dev), "
        f"{search.steps} steps per candidate: lr {recipe.lr:g}, pooling {recipe.pooling} (lr/pooling "
        f"{figure}: {tried})"
    )


def render_control(result: FineTunedResult) -> None:
    """The run's model against its scratch control, the bag-of-words floor and the trivial baseline (the majority
    class; a regression's mean prediction), then the gain in the figure it is of (accuracy; a regression's MSE)."""
    scratch, floor, gains, model = result.scratch, result.floor, result.gain_of, result.model
    assert scratch is not None and floor is not None and gains is not None and model is not None
    splits = ["", "test_"] if result.test_examples is not None else [""]
    figure = next(iter(gains))  # the dev figure the gain is of: accuracy, or a regression's mse
    table = Table(title=f"{result.name}: against the controls", title_justify="left")
    table.add_column("model")
    for prefix in splits:
        table.add_column(f"{prefix.rstrip('_') or 'dev'} {figure}", justify="right")
    table.add_column("recipe")

    def row(name: str, tuned: TunedFigures) -> None:
        cells = [_cell(tuned.mean(p + figure), tuned.std(p + figure)) for p in splits]
        table.add_row(name, *cells, f"lr {tuned.recipe.lr:g}, {tuned.recipe.pooling}")

    row(f"pre-trained {result.objective}", model)
    row(f"scratch {result.arch}", scratch.model)
    table.add_row("bag of words", *(f"{floor.figures[p + figure]:.4f}" for p in splits), floor.method)
    baseline, value = next((name, result.baseline[k]) for k, name in BASELINES.items() if k in result.baseline)
    table.add_row(baseline, f"{value:.4f}", *[""] * (len(splits) - 1), "")
    intervals = [gains[p + figure] for p in splits]
    verdicts = ", ".join("significant" if g.significant else "not significant" for g in intervals)
    shown = [f"{g.gain:+.4f} [{g.interval[0]:+.3f}, {g.interval[1]:+.3f}]" for g in intervals if g.interval]
    table.add_row("gain [95%]", *shown, verdicts)
    print_whole(table)
    if scratch.shared:
        console.print(
            "scratch control: read back, not fine-tuned again: an earlier run fine-tuned the same fresh weights on "
            "the same tokens with the same recipe (one control per architecture and size)"
        )
    if scratch.model.recipe.search is not None:
        console.print(describe_search("scratch", scratch.model))
    for prefix in splits:
        console.print(describe_gain(f"{prefix.rstrip('_') or 'dev'} {figure}:", gains[prefix + figure].to_json()))
