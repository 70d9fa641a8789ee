"""What the fine-tuned kinds share (`FineTunedKind`): a task named in downstream.classification_tasks (or given to
lmpt-finetune) is found, read and checked before any training, fine-tuned once per seed beside its scratch control and
bag-of-words floor (lmpt.downstream.finetuning.finetune), and logged; each kind says what its head predicts (its
`target`), how its entries are named and which figures it logs."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lmpt.config.schema import DownstreamConfig, FinetuneRecipe
from lmpt.data.readers.jsonl import jsonl_records
from lmpt.downstream.figures import BAG_OF_WORDS, GLUE_METRICS, GLUE_SCORE, GLUE_SCORE_MEAN, SCRATCH, mean_of, std_of
from lmpt.downstream.kinds.base import ScoringRun, TaskKind
from lmpt.downstream.tasks.glue import glue_examples, is_entry, parse_entry
from lmpt.downstream.tasks.options import FinetuneOptions, TaskData
from lmpt.errors import LmptError

if TYPE_CHECKING:
    from lmpt.downstream.finetuning.targets import Target
    from lmpt.quality.decontamination import TaskItems
    from lmpt.rundir.trained import Trained


@dataclass(frozen=True)
class FineTunedTask:
    """A fine-tuned task as downstream.classification_tasks names it: its record's name and its files."""

    name: str
    data: TaskData


class FineTunedKind(TaskKind):
    """A kind whose tasks are fine-tuned (listed in downstream.classification_tasks, or given to lmpt-finetune)."""

    @classmethod
    def target(cls) -> Target:
        """What the kind's head predicts (lmpt.downstream.finetuning.targets): imported when a task is used."""
        raise NotImplementedError

    @classmethod
    def find(cls, task: str, key: str) -> FineTunedTask:
        """The task `key=task` names: its name and files; a problem is one LmptError naming `key`. Any kind reads a
        GLUE entry (glue:NAME@DIR: the task named as GLUE's folder, its files in DIR); `find_files` the rest."""
        if is_entry(task):
            glue, root = parse_entry(task, key)
            return FineTunedTask(glue.name, TaskData(dir=root))
        return cls.find_files(task, key)

    @classmethod
    def find_files(cls, task: str, key: str) -> FineTunedTask:
        """The task `key=task` names, when it is not a GLUE entry."""
        raise NotImplementedError

    @classmethod
    def decontamination_texts(cls, task: str, key: str) -> TaskItems:
        """Every string field of every dev and test record, one text a record (a GLUE task's: each example's texts)."""
        from lmpt.quality.decontamination import TaskItems

        found = cls.find(task, key)
        if found.data.dir is not None:
            _, examples = glue_examples(found.data.dir, found.name, key)
            texts = [" ".join(filter(None, (e.text, e.pair))) for s in ("dev", "test") for e in examples.get(s, [])]
            return TaskItems(found.name, texts)
        files = [Path(file) for file in (found.data.dev, found.data.test) if file]
        return TaskItems(found.name, [text for file in files for text in _record_texts(file)])

    @classmethod
    def scoring_tokens(cls, task: str, key: str, run: ScoringRun) -> float:
        """The fine-tuning's examples through the body (as its progress bar counts them: a training pass three, the
        recipe search included), each of its mean length in tokens, at most the run's windows."""
        from lmpt.downstream.finetuning.finetune import check_task
        from lmpt.downstream.finetuning.recipe_search import examples_work, recipe_space

        o = cls.options(run.downstream, cls.find(task, key), "cpu")
        _, labelled = check_task(o, run.seq_len, run.seq_len, cls.target())
        splits = labelled.examples
        n_scored = sum(len(examples) for role, examples in splits.items() if role != "train")
        work = examples_work(len(splits["train"]), n_scored, o, recipe_space(run.arch, o))
        texts = [" ".join(filter(None, (e.text, e.pair))) for examples in splits.values() for e in examples]
        mean = sum(min(run.seq_len, run.tokens(t) + 2) for t in texts) / max(1, len(texts))
        return float(work * mean)

    @classmethod
    def options(cls, downstream: DownstreamConfig, task: FineTunedTask, device: str) -> FinetuneOptions:
        """How a run fine-tunes `task` after training on `device` (cpu or cuda): downstream.lr fixed is the mode's
        fixed rate (lr=None), search or a number as lmpt-finetune takes them (checked at start-up with the task)."""
        recipe = {f.name: getattr(downstream, f.name) for f in dataclasses.fields(FinetuneRecipe)}
        lr = None if downstream.lr == "fixed" else downstream.lr
        return FinetuneOptions(data=task.data, task=task.name, device=device, lr=lr, **recipe)

    @classmethod
    def check(cls, options: FinetuneOptions, key: str, seq_len: int, max_seq_len: int) -> None:
        """The task read and checked as fine-tuning checks it (lmpt.downstream.finetuning.finetune.check_task: its
        options, its labels, and the run's data.seq_len `seq_len` against the model's `max_seq_len`), before any
        training; a problem is one LmptError naming `key` and the task."""
        from lmpt.downstream.finetuning.finetune import check_task  # torch-heavy: only when a task is named

        try:
            check_task(options, max_seq_len, seq_len, cls.target())
        except LmptError as exc:
            raise LmptError(f"{key} ({options.task}): {exc}") from None

    @classmethod
    def score(cls, trained: Trained, options: FinetuneOptions) -> dict:
        """The task fine-tuned on `trained` (lmpt.downstream.finetuning.finetune.finetune): its result, stamped with
        its kind (`TaskKind.stamped`)."""
        from lmpt.downstream.finetuning.finetune import finetune  # torch-heavy: only when a task is scored

        return cls.stamped(finetune(trained, options, cls.target()))

    @classmethod
    def logged(cls, result: dict) -> dict[str, float]:
        """What a fine-tuning logs to metrics.jsonl after training."""
        raise NotImplementedError

    @classmethod
    def official_logged(cls, result: dict) -> dict[str, float]:
        """A GLUE task's official figures (means over seeds: f1_mean, mcc_mean, matched_accuracy_mean ...), its
        score's mean and std (glue_score_mean ranks runs) and, with a scratch control, the control's and the floor's
        score; nothing for a task that is not GLUE's."""
        metrics = result.get(GLUE_METRICS) or []
        if not metrics:
            return {}
        figures = {mean_of(m): result.get(mean_of(m)) for m in (*metrics, GLUE_SCORE)}
        figures[std_of(GLUE_SCORE)] = result.get(std_of(GLUE_SCORE))
        if result.get("control") == SCRATCH:
            figures[f"{SCRATCH}_{GLUE_SCORE_MEAN}"] = result[SCRATCH].get(GLUE_SCORE_MEAN)
            figures[f"bow_{GLUE_SCORE}"] = result[BAG_OF_WORDS].get(GLUE_SCORE)
        return {k: v for k, v in figures.items() if v is not None}  # a std over one seed is not logged


def _record_texts(path: Path) -> Iterator[str]:
    """Every string field of every record of a .jsonl file, as one text per record."""
    for _, record in jsonl_records(path):
        values = record.values() if isinstance(record, dict) else [record]
        text = " ".join(v for v in values if isinstance(v, str))
        if text.strip():
            yield text
