"""Fine-tune one model on a task: search its recipe when asked (lmpt.downstream.finetuning.recipe_search), then train
and score it once per seed with the recipe chosen. The run's model and its scratch control each go through this, so they
get the same search, seeds and data."""

from __future__ import annotations

from dataclasses import dataclass

from lmpt.downstream.finetuning.classifier import SequenceClassifier
from lmpt.downstream.finetuning.encoded_task import Task
from lmpt.downstream.finetuning.recipe_search import RecipeSpace, search_recipe, search_work
from lmpt.downstream.finetuning.training import UNLABELLED, SeedPlan, SeedRuns, run_seeds, seeds_work, steps_per_seed
from lmpt.downstream.tasks.options import FinetuneOptions
from lmpt.inference.progress import WorkBar
from lmpt.model import LanguageModel
from lmpt.tokenizer.special import SpecialTokens
from lmpt.train.precision import Precision


@dataclass
class Tuned:
    """One model fine-tuned: the recipe it used, the search that chose it (None when fixed) and its seeds."""

    lr: float
    pooling: str
    steps: int
    """Optimizer steps of each seed."""
    runs: SeedRuns
    search: dict | None


def tuning_work(task: Task, o: FinetuneOptions, space: RecipeSpace) -> int:
    """One model's fine-tuning, search included, in examples through the body (training.seeds_work): the progress
    bar's total."""
    n_scored = sum(len(s) for s in (task.dev, task.test, task.unlabelled) if s is not None)
    return examples_work(len(task.train), n_scored, o, space)


def examples_work(n_train: int, n_scored: int, o: FinetuneOptions, space: RecipeSpace) -> int:
    """`tuning_work` of `n_train` training and `n_scored` scored examples (also what the study's plan counts before
    any task is encoded)."""
    probe = o.mode == "probe"
    steps = steps_per_seed(n_train, o.batch_size, o.epochs, o.max_steps)
    work = seeds_work(n_train, n_scored, o.batch_size, steps, o.seeds, probe)
    return work + (len(space.candidates) * search_work(n_train, o, probe) if space.searched else 0)


def tune(
    body: LanguageModel,
    task: Task,
    o: FinetuneOptions,
    space: RecipeSpace,
    precision: Precision,
    special: SpecialTokens,
    arch: str,
    bar: WorkBar,
    label: str = "",
) -> Tuned:
    """Fine-tune `body` (its weights restored before every seed and candidate; a probe never changes them); `bar`
    shows `label` (the task and model) and the phase running."""
    probe = o.mode == "probe"
    pretrained = None if probe else {k: v.clone() for k, v in body.state_dict().items()}
    outputs = task.target.outputs(task.classes)
    classifier = SequenceClassifier(body, space.poolings[0], outputs, o.dropout).to(precision.device)
    if o.compile:
        classifier.compile_body()

    def make_plan(lr: float, pooling: str, n_train: int, epochs: int) -> SeedPlan:
        classifier.pooling = pooling  # the head reads a d_model vector whatever the pooling: one classifier serves
        steps = steps_per_seed(n_train, o.batch_size, epochs, o.max_steps)
        return SeedPlan(
            classifier,
            pretrained,
            precision,
            arch,
            special,
            o.batch_size,
            steps,
            lr,
            round(o.warmup * steps),
            o.weight_decay,
            task.classes,
            task.target,
        )

    lr, pooling, search = space.lrs[0], space.poolings[0], None
    if space.searched:
        lr, pooling, search = search_recipe(make_plan, task.train, space, o, probe, bar, label, task.target.headline)
    plan = make_plan(lr, pooling, len(task.train), o.epochs)
    splits = {"train": task.train, "": task.dev, "test_": task.test, UNLABELLED: task.unlabelled}
    runs = run_seeds(plan, splits, probe, range(o.seed, o.seed + o.seeds), bar, phase=label)
    return Tuned(lr, pooling, plan.steps, runs, search)
