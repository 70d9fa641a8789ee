"""What the fine-tuned kinds share (`FineTunedTask`, `FineTunedResult`): a task named by a folder, a prefix or a GLUE
entry (glue:NAME@DIR) is found, read and checked before any training, fine-tuned once per seed by the fine-tuning
engine (lmpt.downstream.finetune) beside its scratch control and its floor, and logged; each kind says what its head
predicts (its `target`), which specs it claims and which figures it logs. Its result renders as lmpt-finetune prints
it: the figures per seed, the recipe its search chose, and with control=scratch the model against its controls."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

from rich.table import Table

from lmpt.config.schema import FinetuneRecipe
from lmpt.console import console, print_whole
from lmpt.data.readers.jsonl import jsonl_records
from lmpt.downstream.figures import (
    ACCURACY,
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
from lmpt.downstream.glue import glue_examples, is_entry, parse_entry
from lmpt.downstream.significance import describe_gain
from lmpt.downstream.sources import MODE_MEANINGS, FinetuneOptions, TaskData, labelled_name
from lmpt.downstream.task import DEFAULT_SCORING, Result, RunShape, Scoring, ScoringRun, Task
from lmpt.errors import LmptError

if TYPE_CHECKING:
    from typing_extensions import Self

    from lmpt.downstream.training import Target
    from lmpt.quality.decontamination import TaskItems
    from lmpt.rundir.trained import Trained

BASELINES = {MAJORITY_ACCURACY: "majority class", MEAN_BASELINE_MSE: "mean prediction"}
"""The trivial baseline's figure of a record, and its row's name: a classification's, or a regression's."""


class Found(NamedTuple):
    """A fine-tuned task as its spec names it: its record's name and its files."""

    name: str
    data: TaskData


@dataclass(frozen=True, kw_only=True)
class FineTunedTask(Task):
    """A task fine-tuned after training (or by lmpt-finetune): its files and the options it is fine-tuned with."""

    result_type: ClassVar[type[FineTunedResult]]
    numbers: ClassVar[bool] = False
    """The labels are numbers to predict (lmpt-finetune's regression=true), not classes."""

    data: TaskData
    options: FinetuneOptions

    @classmethod
    def target(cls) -> Target:
        """What the kind's head predicts (lmpt.downstream.training): imported when a task is used."""
        raise NotImplementedError

    @classmethod
    def find(cls, spec: str, key: str) -> Found:
        """The task `key=spec` names: its name and files; a problem is one LmptError naming `key`. Any kind reads a
        GLUE entry (glue:NAME@DIR: the task named as GLUE's folder, its files in DIR); `find_files` the rest."""
        if is_entry(spec):
            glue, root = parse_entry(spec, key)
            return Found(glue.name, TaskData(dir=root))
        return cls.find_files(spec, key)

    @classmethod
    def find_files(cls, spec: str, key: str) -> Found:
        """The task `key=spec` names, when it is not a GLUE entry."""
        raise NotImplementedError

    @classmethod
    def named(cls, spec: str, key: str = "task") -> str:
        return cls.find(spec, key).name

    @classmethod
    def read(cls, spec: str, key: str = "task", how: Scoring = DEFAULT_SCORING) -> Self:
        """The task found (`find`), with the options a run fine-tunes it with after training on `how.device`:
        downstream.lr fixed is the mode's fixed rate (lr=None), search or a number as lmpt-finetune takes them."""
        name, data = cls.find(spec, key)
        if how.recipe is None:
            return cls(name=name, key=key, how=how, data=data, options=FinetuneOptions(data, task=name))
        recipe = {f.name: getattr(how.recipe, f.name) for f in dataclasses.fields(FinetuneRecipe)}
        lr = None if how.recipe.lr == "fixed" else how.recipe.lr
        options = FinetuneOptions(data=data, task=name, device=how.device, lr=lr, **recipe)
        return cls(name=name, key=key, how=how, data=data, options=options)

    @classmethod
    def given(cls, options: FinetuneOptions) -> Self:
        """The task lmpt-finetune's `options` name (their data.* files, or a bundled task's), fine-tuned with them."""
        return cls(name=labelled_name(options), data=options.data, options=options)

    def texts(self) -> TaskItems:
        """Every string field of every dev and test record, one text a record (a GLUE task's: each example's texts)."""
        from lmpt.quality.decontamination import TaskItems

        if self.data.dir is not None:
            _, examples = glue_examples(self.data.dir, self.name, self.key)
            texts = [" ".join(filter(None, (e.text, e.pair))) for s in ("dev", "test") for e in examples.get(s, [])]
            return TaskItems(self.name, texts)
        files = [Path(file) for file in (self.data.dev, self.data.test) if file]
        return TaskItems(self.name, [text for file in files for text in _record_texts(file)])

    def scoring_tokens(self, run: ScoringRun) -> float:
        """The fine-tuning's examples through the body (as its progress bar counts them: a training pass three, the
        recipe search included), each of its mean length in tokens, at most the run's windows."""
        from lmpt.downstream.finetune import check_task, examples_work, recipe_space

        o = self.options
        _, labelled = check_task(o, run.seq_len, run.seq_len, self.target())
        splits = labelled.examples
        n_scored = sum(len(examples) for role, examples in splits.items() if role != "train")
        work = examples_work(len(splits["train"]), n_scored, o, recipe_space(run.arch, o))
        texts = [" ".join(filter(None, (e.text, e.pair))) for examples in splits.values() for e in examples]
        mean = sum(min(run.seq_len, run.tokens(t) + 2) for t in texts) / max(1, len(texts))
        return float(work * mean)

    def check(self, run: RunShape) -> None:
        """The task read and checked as fine-tuning checks it (lmpt.downstream.finetune.check_task: its options, its
        labels, and the run's data.seq_len against the model's max_seq_len), before any training; a problem is one
        LmptError naming the key and the task."""
        from lmpt.downstream.finetune import check_task  # torch-heavy: only when a task is named

        try:
            check_task(self.options, run.max_seq_len, run.seq_len, self.target())
        except LmptError as exc:
            raise LmptError(f"{self.key} ({self.options.task}): {exc}") from None

    def score(self, trained: Trained) -> FineTunedResult:
        """The task fine-tuned on `trained` (lmpt.downstream.finetune.finetune)."""
        from lmpt.downstream.finetune import finetune  # torch-heavy: only when a task is scored

        return self.result_type.of(finetune(trained, self.options, self.target()))


def _record_texts(path: Path) -> Iterator[str]:
    """Every string field of every record of a .jsonl file, as one text per record."""
    for _, record in jsonl_records(path):
        values = record.values() if isinstance(record, dict) else [record]
        text = " ".join(v for v in values if isinstance(v, str))
        if text.strip():
            yield text


@dataclass(frozen=True)
class FineTunedResult(Result):
    """A fine-tuning's result: figures per seed and their means, the recipe, and with a control its sections. A kind
    names the figures it logs, its headline figure and the figure its gain over the control is of."""

    logged_figures: ClassVar[tuple[str, ...]] = ()
    control_figures: ClassVar[tuple[str, str, str]] = ("", "", "")
    """The names, in metrics.jsonl, of the control's headline, the gain over it and the floor's headline."""
    headline: ClassVar[str] = ""
    gain_figure: ClassVar[str] = ""

    def run_record(self, name: str, weights: str) -> dict[str, Any]:
        return {**self.record, "weights": weights}

    def logged(self) -> dict[str, float]:
        """What a fine-tuning logs to metrics.jsonl after training: the kind's `logged_figures` and, with a scratch
        control, its `control_figures` (the control's dev headline, the gain over it in `gain_figure`, the floor's
        headline), then GLUE's figures."""
        result = self.record
        figures = {k: result[k] for k in self.logged_figures if k in result}
        if result.get("control") == SCRATCH:
            scratch, gain, floor = self.control_figures
            figures[scratch] = result[SCRATCH][mean_of(self.headline)]
            figures[gain] = result[GAIN][self.gain_figure]["gain"]
            figures[floor] = result[BAG_OF_WORDS][self.headline]
        return figures | self.official_logged()

    def official_logged(self) -> dict[str, float]:
        """A GLUE task's official figures (means over seeds: f1_mean, mcc_mean, matched_accuracy_mean ...), its
        score's mean and std (glue_score_mean ranks runs) and, with a scratch control, the control's and the floor's
        score; nothing for a task that is not GLUE's."""
        result = self.record
        metrics = result.get(GLUE_METRICS) or []
        if not metrics:
            return {}
        figures = {mean_of(m): result.get(mean_of(m)) for m in (*metrics, GLUE_SCORE)}
        figures[std_of(GLUE_SCORE)] = result.get(std_of(GLUE_SCORE))
        if result.get("control") == SCRATCH:
            figures[f"{SCRATCH}_{GLUE_SCORE_MEAN}"] = result[SCRATCH].get(GLUE_SCORE_MEAN)
            figures[f"bow_{GLUE_SCORE}"] = result[BAG_OF_WORDS].get(GLUE_SCORE)
        return {k: v for k, v in figures.items() if v is not None}  # a std over one seed is not logged

    def render(self) -> None:
        """The figures as a rich table (one row per figure, mean ± std then each seed), the recipe the search chose,
        and with a scratch control the model against its controls."""
        result = self.record
        mode = result["mode"]
        title = (
            f"lmpt-finetune {result['task']}: {result['objective']} {result['arch']}, "
            f"mode={mode} ({MODE_MEANINGS[mode]}), pooling {result['pooling']}, "
            f"{result['seeds']} seed(s) x {result['steps']} steps"
        )
        table = Table(title=title, title_justify="left")
        table.add_column("figure")
        table.add_column("mean ± std", justify="right")
        for run in result["per_seed"]:
            table.add_column(f"seed {run['seed']}", justify="right")
        for prefix, split in (("", "dev"), ("test_", "test")):
            for figure in SEED_FIGURES:
                key = prefix + figure
                if f"{key}_mean" in result:
                    seeds = [f"{run[key]:.4f}" for run in result["per_seed"]]
                    table.add_row(f"{split} {figure}", _cell(result[f"{key}_mean"], result[f"{key}_std"]), *seeds)
        table.add_row("train loss", "", *(f"{run['train_loss']:.4f}" for run in result["per_seed"]))
        print_whole(table)
        baseline = (
            f"dev mean-prediction MSE {result[MEAN_BASELINE_MSE]:.4f}"
            if MEAN_BASELINE_MSE in result
            else f"classes {result['classes']} · dev majority-class accuracy {result[MAJORITY_ACCURACY]:.4f}"
        )
        console.print(
            f"{baseline} · {result['train_examples']:,} train / {result['dev_examples']:,} dev examples · "
            f"{result['precision']} · record {result['record']} (a hand run: the run's own records in RUN/downstream/ "
            "are left as they are)"
        )
        if "search" in result:
            console.print(describe_search("pre-trained", result))
        if result.get("control") == SCRATCH:
            render_control(result)


def _cell(mean: float, std: float | None) -> str:
    return f"{mean:.4f}" if std is None else f"{mean:.4f} ± {std:.4f}"


def describe_search(name: str, tuned: dict) -> str:
    """One line: the recipe a search chose and every candidate's accuracy on the held-back slice."""
    search = tuned["search"]
    figure = str(search.get("picked_by", ACCURACY)).split()[0]  # the figure the search picked by
    tried = ", ".join(f"{c['lr']:g}/{c['pooling']} {c[figure]:.3f}" for c in search["candidates"])
    return (
        f"{name} recipe searched on {search['held_out']} examples held back from train (never dev), "
        f"{search['steps']} steps per candidate: lr {tuned['lr']:g}, pooling {tuned['pooling']} (lr/pooling "
        f"{figure}: {tried})"
    )


def render_control(result: dict) -> None:
    """The run's model against its scratch control, the bag-of-words floor and the trivial baseline (the majority
    class; a regression's mean prediction), then the gain in the figure it is of (accuracy; a regression's MSE)."""
    scratch, bow, gains = result[SCRATCH], result[BAG_OF_WORDS], result[GAIN]
    splits = ["", "test_"] if "test_examples" in result else [""]
    figure = next(iter(gains))  # the dev figure the gain is of: accuracy, or a regression's mse
    table = Table(title=f"{result['task']}: against the controls", title_justify="left")
    table.add_column("model")
    for prefix in splits:
        table.add_column(f"{prefix.rstrip('_') or 'dev'} {figure}", justify="right")
    table.add_column("recipe")

    def row(name: str, tuned: dict) -> None:
        cells = [_cell(tuned[mean_of(p + figure)], tuned[std_of(p + figure)]) for p in splits]
        table.add_row(name, *cells, f"lr {tuned['lr']:g}, {tuned['pooling']}")

    row(f"pre-trained {result['objective']}", result)
    row(f"scratch {result['arch']}", scratch)
    table.add_row("bag of words", *(f"{bow[p + figure]:.4f}" for p in splits), bow["method"])
    baseline, value = next((name, result[k]) for k, name in BASELINES.items() if k in result)
    table.add_row(baseline, f"{value:.4f}", *[""] * (len(splits) - 1), "")
    intervals = [gains[p + figure] for p in splits]
    verdicts = ", ".join("significant" if g["significant"] else "not significant" for g in intervals)
    shown = [f"{g['gain']:+.4f} [{g['interval'][0]:+.3f}, {g['interval'][1]:+.3f}]" for g in intervals]
    table.add_row("gain [95%]", *shown, verdicts)
    print_whole(table)
    if scratch.get("shared"):
        console.print(
            "scratch control: read back, not fine-tuned again: an earlier run fine-tuned the same fresh weights on "
            "the same tokens with the same recipe (one control per architecture and size)"
        )
    if "search" in scratch:
        console.print(describe_search("scratch", scratch))
    for prefix in splits:
        console.print(describe_gain(f"{prefix.rstrip('_') or 'dev'} {figure}:", gains[prefix + figure]))
