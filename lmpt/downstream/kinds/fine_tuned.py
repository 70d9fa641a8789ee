"""What the fine-tuned kinds share (`FineTunedTask`; their result, `FineTunedResult`, is
lmpt.downstream.kinds.fine_tuned_result): a task named by a folder, a prefix or a GLUE entry (glue:NAME@DIR) is found,
its examples read by its source (lmpt-finetune's data.* files, or a GLUE folder: lmpt.downstream.labelled
.ExampleSource) with its own metrics and the files it only predicts, checked before any training, and fine-tuned once
per seed by the fine-tuning engine (lmpt.downstream.finetune) beside its scratch control and its floor; each kind says
what its head predicts (its `target`), which specs it claims and which figures it logs. Whoever names the task (a run's
downstream.tasks, `lmpt-finetune`, GLUE's suite) scores it the one way, `score`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, NamedTuple

from lmpt.config.schema import FinetuneRecipe
from lmpt.downstream.glue import is_entry, parse_entry
from lmpt.downstream.glue_files import GlueSource
from lmpt.downstream.kinds.fine_tuned_result import FineTunedResult
from lmpt.downstream.labelled import ExampleSource, LabelledFiles, LabelledTask
from lmpt.downstream.labelled_files import TaskData
from lmpt.downstream.options import FinetuneOptions, labelled_name
from lmpt.downstream.task import DEFAULT_SCORING, RunShape, Scoring, ScoringRun, Task
from lmpt.errors import LmptError

if TYPE_CHECKING:
    from typing_extensions import Self

    from lmpt.downstream.target import Target
    from lmpt.quality.decontamination import TaskItems
    from lmpt.rundir.trained import Trained


class Found(NamedTuple):
    """A fine-tuned task as its spec names it: its record's name, where its examples come from, and its files when
    they are lmpt-finetune's data.* (a GLUE entry's are none: its folder is its source's)."""

    name: str
    source: ExampleSource
    data: TaskData | None = None

    @classmethod
    def files(cls, name: str, data: TaskData) -> Found:
        """A task whose examples are the files `data` names."""
        return cls(name, LabelledFiles(data, name), data)


@dataclass(frozen=True, kw_only=True)
class FineTunedTask(Task):
    """A task fine-tuned after training (or by lmpt-finetune): where its examples come from and the options it is
    fine-tuned with."""

    result_type: ClassVar[type[FineTunedResult]]
    numbers: ClassVar[bool] = False
    """The labels are numbers to predict (lmpt-finetune's regression=true), not classes."""

    source: ExampleSource
    options: FinetuneOptions
    read_already: LabelledTask | None = field(default=None, compare=False, repr=False)
    """The task's examples when read already (`with_examples`): a suite reads each of its tasks once."""

    @classmethod
    def target(cls) -> Target:
        """What the kind's head predicts (lmpt.downstream.target): imported when a task is used."""
        raise NotImplementedError

    @classmethod
    def find(cls, spec: str, key: str) -> Found:
        """The task `key=spec` names: its name and source; a problem is one LmptError naming `key`. Any kind reads a
        GLUE entry (glue:NAME@DIR: the task named as GLUE's folder, its files in DIR); `find_files` the rest."""
        if is_entry(spec):
            glue, root = parse_entry(spec, key)
            return Found(glue.name, GlueSource(root, glue, key))
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
        name, source, files = cls.find(spec, key)
        data = files or TaskData()
        if how.recipe is None:
            return cls(name=name, key=key, how=how, source=source, options=FinetuneOptions(data, task=name))
        recipe = {f.name: getattr(how.recipe, f.name) for f in dataclasses.fields(FinetuneRecipe)}
        lr = None if how.recipe.lr == "fixed" else how.recipe.lr
        options = FinetuneOptions(data=data, task=name, device=how.device, lr=lr, **recipe)
        return cls(name=name, key=key, how=how, source=source, options=options)

    @classmethod
    def given(cls, options: FinetuneOptions) -> Self:
        """The task lmpt-finetune's `options` name (their data.* files, or a bundled task's), fine-tuned with them."""
        found = Found.files(labelled_name(options), options.data)
        return cls(name=found.name, source=found.source, options=options)

    @classmethod
    def entry(cls, spec: str, options: FinetuneOptions, key: str = "task") -> Self:
        """The task `key=spec` names (a GLUE entry of `lmpt-finetune task=glue`), fine-tuned with lmpt-finetune's
        `options`, its files its source's."""
        name, source, files = cls.find(spec, key)
        replaced = dataclasses.replace(options, task=name, data=files or TaskData())
        return cls(name=name, key=key, source=source, options=replaced)

    def examples(self) -> LabelledTask:
        """The task read and checked by its source (its examples, classes, metrics and unlabelled files)."""
        return self.read_already or self.source.read(self.numbers)

    def with_examples(self) -> Self:
        """The same task, its examples read now and kept."""
        return dataclasses.replace(self, read_already=self.examples())

    def texts(self) -> TaskItems:
        """The dev and test texts its source gives (a file's: every string field of a record, one text a record)."""
        from lmpt.quality.decontamination import TaskItems

        return TaskItems(self.name, self.source.texts())

    def scoring_tokens(self, run: ScoringRun) -> float:
        """The fine-tuning's examples through the body (as its progress bar counts them: a training pass three, the
        recipe search included), each of its mean length in tokens, at most the run's windows."""
        from lmpt.downstream.finetune import check_task, examples_work
        from lmpt.downstream.recipe import recipe_space

        o = self.options
        _, labelled = check_task(o, run.seq_len, run.seq_len, self.target(), self.examples())
        splits = {**labelled.examples, "unlabelled": labelled.unlabelled_examples()}
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
            check_task(self.options, run.max_seq_len, run.seq_len, self.target(), self.examples())
        except LmptError as exc:
            raise LmptError(f"{self.key} ({self.options.task}): {exc}") from None

    def score(self, trained: Trained) -> FineTunedResult:
        """The task fine-tuned on `trained` (lmpt.downstream.finetune.finetune); the result carries its predictions
        by model and split."""
        from lmpt.downstream.finetune import finetune  # torch-heavy: only when a task is scored

        return self.result_type.of(finetune(trained, self.options, self.target(), self.examples()))
