"""What the fine-tuned kinds share (`FineTunedTask`; their result, `FineTunedResult`, is
lmpt.downstream.kinds.fine_tuned_result): a task named by a folder, a prefix or a GLUE entry (glue:NAME@DIR) is found,
read and checked before any training, fine-tuned once per seed by the fine-tuning engine (lmpt.downstream.finetune)
beside its scratch control and its floor; each kind says what its head predicts (its `target`), which specs it claims
and which figures it logs."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, NamedTuple

from lmpt.config.schema import FinetuneRecipe
from lmpt.data.readers.jsonl import jsonl_records
from lmpt.downstream.glue import glue_examples, is_entry, parse_entry
from lmpt.downstream.kinds.fine_tuned_result import FineTunedResult
from lmpt.downstream.sources import FinetuneOptions, TaskData, labelled_name
from lmpt.downstream.task import DEFAULT_SCORING, RunShape, Scoring, ScoringRun, Task
from lmpt.errors import LmptError

if TYPE_CHECKING:
    from typing_extensions import Self

    from lmpt.downstream.training import Target
    from lmpt.quality.decontamination import TaskItems
    from lmpt.rundir.trained import Trained


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
