"""`lmpt-finetune RUN task=glue data.dir=DIR` (or `task=glue:rte,mrpc,sts-b`): GLUE's tasks read as they ship
(lmpt.downstream.glue), every file read and checked before any model is loaded, then each task scored as any task is
(`Task.score`: fine-tuned as lmpt-finetune fine-tunes one, recipe searched per task, the scratch control and the
bag-of-words floor beside it; STS-B with a regression head and a ridge floor): a task of the suite and the same task in
a run's downstream.tasks (glue:NAME@DIR) take one route and write one record. The official figures of every model
(lmpt.downstream.official), which each fine-tuning computes per seed from its dev predictions, are kept in the record
with the GLUE score over the tasks' results, and those predictions beside it
(RUN/downstream/hand/glue-TIME/dev/TASK.json) so that anyone can compute them again; the test predictions of the first
seed go into the files the GLUE server takes (RUN/downstream/hand/glue-TIME/test/CoLA.tsv ...). MNLI's mismatched dev
set is scored as its fine-tuning's second split (test_* in its result)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from rich.table import Table

from lmpt.config.command_options import require
from lmpt.console import console, print_whole
from lmpt.downstream.bundled import SPLITS
from lmpt.downstream.figures import BAG_OF_WORDS, GLUE_SCORE, SCRATCH, UNLABELLED
from lmpt.downstream.finetune import check_settings, check_task
from lmpt.downstream.glue import GlueTask, entries, glue_score, parse_entry, server_file
from lmpt.downstream.glue_files import write_server_file
from lmpt.downstream.kinds.fine_tuned import FineTunedTask
from lmpt.downstream.kinds.fine_tuned_result import FineTunedResult, Predictions
from lmpt.downstream.labelled import LabelledTask
from lmpt.downstream.official import SCORED_SPLITS, as_written
from lmpt.downstream.options import FinetuneOptions
from lmpt.downstream.records import hand_record_path, write_record
from lmpt.downstream.task import RECORD_VERSION, kind_of
from lmpt.rundir.trained import load_trained, locate_weights
from lmpt.safe_files import write_atomically
from lmpt.train.placement import take_threads

GLUE = "glue"
PRETRAINED = "pretrained"
SUITE_KIND = "glue-suite"
"""The `kind` of the suite's record: no task kind's (the registry reads it as none of its kinds); the records of its
tasks inside it name theirs."""
MODELS = (PRETRAINED, SCRATCH, BAG_OF_WORDS)
"""The models of the table: the run's, its untrained control, the bag-of-words floor."""


def is_glue(task: str | None) -> bool:
    """Whether `task=` asks for GLUE (glue, or glue:NAMES)."""
    return task is not None and task.partition(":")[0].strip().lower() == GLUE


@dataclass(frozen=True)
class GlueJob:
    """One GLUE task, read by its kind (classification, or STS-B's regression) from GLUE's source with its examples
    read and checked, ready to score."""

    glue: GlueTask
    task: FineTunedTask

    @property
    def labelled(self) -> LabelledTask:
        return self.task.examples()


@dataclass(frozen=True)
class GlueSuite:
    """GLUE as a suite: each task GLUE's source yields (lmpt.downstream.glue.entries) read by its kind and scored as
    any task is (`Task.score`, with lmpt-finetune's options), and the GLUE score of each model over the tasks'
    results (`scores`)."""

    jobs: tuple[GlueJob, ...]
    options: FinetuneOptions

    @classmethod
    def read(cls, o: FinetuneOptions) -> GlueSuite:
        """Every task `o.task` names, read from `o.data.dir` and checked with the options; refused in one line before
        any model."""
        check_settings(o)
        given = [f"data.{s}" for s in SPLITS if getattr(o.data, s) is not None]
        require(not given, f"task={o.task} reads each task's files from data.dir: drop {', '.join(given)}")
        require(o.data.dir is not None, f"task={o.task} needs data.dir=DIR, the folder GLUE's download script writes")
        jobs = []
        for entry in entries(o.task or GLUE, str(o.data.dir)):
            kind = kind_of(entry)
            assert issubclass(kind, FineTunedTask), f"{entry} is read by a kind that does not fine-tune"
            glue, _ = parse_entry(entry, "task")
            jobs.append(GlueJob(glue, kind.entry(entry, o).with_examples()))
        return cls(tuple(jobs), o)

    def scores(self, models: dict[str, dict[str, dict]]) -> dict[str, float | None]:
        """Each model's GLUE score over the tasks' official scores (WNLI counted when the options say so)."""
        with_wnli = self.options.wnli_in_score
        return {
            m: glue_score({t: f["score"] for t, f in tasks.items()}, with_wnli) for m, tasks in models.items() if tasks
        }

    def run(self, run: str | Path) -> dict:
        """Score every task on RUN and keep the record, its dev predictions and the test files (module docstring);
        the record as a dict, with `record` its path."""
        o = self.options
        run_dir = locate_weights(run).run_dir
        path = hand_record_path(run_dir, GLUE)
        take_threads()  # its slot's threads, else the cores free of other work (lmpt.train.placement)
        trained = load_trained(run, o.device)
        seq_len, max_seq_len = int(trained.config.data.seq_len), trained.model.max_seq_len
        for job in self.jobs:  # every task's options and sizes checked before the first trains
            check_task(job.task.options, max_seq_len, seq_len, job.task.target(), job.labelled)
        results = {job.glue.hf: job.task.score(trained) for job in self.jobs}
        folder = path.with_suffix("")
        models: dict[str, dict] = {m: {} for m in MODELS}
        for job in self.jobs:
            result = results[job.glue.hf]
            kept = result.predictions or {}
            dev_files = dict(zip(SCORED_SPLITS, job.glue.dev_files, strict=False))
            gold = {name: [e.label for e in job.labelled.examples[split]] for split, name in dev_files.items()}
            predicted = _predictions(job, kept)
            _write_json(folder / "dev" / f"{job.glue.name}.json", {"task": job.glue.name, "gold": gold, **predicted})
            for model, figures in _official(job.glue, result).items():
                models[model][job.glue.hf] = figures
            _write_test_files(folder / "test", job, kept)
        record = {
            "kind": SUITE_KIND,
            "record_version": RECORD_VERSION,
            "task": GLUE,
            "tasks": [job.glue.name for job in self.jobs],
            "wnli_in_score": o.wnli_in_score,
            "max_train_examples": o.max_train_examples,
            "seeds": o.seeds,
            "mode": o.mode,
            "control": o.control,
            "scores": self.scores(models),
            "models": {m: tasks for m, tasks in models.items() if tasks},
            "dev_predictions": str(folder / "dev"),
            "test_predictions": str(folder / "test"),
            "test_predictions_seed": o.seed,
            "results": {hf: result.to_json() for hf, result in results.items()},  # each task's record, of its kind
            "record": str(path),
        }
        write_record(path, record)
        return record


def _official(task: GlueTask, result: FineTunedResult) -> dict[str, dict]:
    """Each model's official figures and task score as its fine-tuning recorded them (lmpt.downstream.official, per
    seed): the means over seeds of the run's model and its control, the floor's one fit."""
    sections: dict[str, dict[str, float | None]] = {}
    if result.model is not None:
        sections[PRETRAINED] = {m: result.model.mean(m) for m in (*(t.name for t in task.metrics), GLUE_SCORE)}
    if result.scratch is not None:
        scratch = result.scratch.model
        sections[SCRATCH] = {m: scratch.mean(m) for m in (*(t.name for t in task.metrics), GLUE_SCORE)}
    if result.floor is not None:
        sections[BAG_OF_WORDS] = dict(result.floor.figures)
    return {
        model: {"figures": {m.name: section[m.name] for m in task.metrics}, "score": section[GLUE_SCORE]}
        for model, section in sections.items()
    }


def _predictions(job: GlueJob, kept: Predictions) -> dict[str, list[dict[str, list]]]:
    """model -> one {dev file: predictions} a seed (the floor's one fit as one), as GLUE's files write labels."""
    names = dict(zip(SCORED_SPLITS.values(), job.glue.dev_files, strict=False))
    out = {}
    for model in MODELS:
        found = kept.get(model)
        if not found:
            continue
        seeds = len(found[""])
        out[model] = [{names[p]: as_written(found[p][s], job.labelled.classes) for p in names} for s in range(seeds)]
    return out


def _write_json(path: Path, content: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, lambda tmp: tmp.write_text(json.dumps(content) + "\n", encoding="utf-8"))


def _write_test_files(folder: Path, job: GlueJob, kept: Predictions) -> None:
    """The first seed's predictions of each test file, as the GLUE server takes them."""
    if not job.labelled.unlabelled:
        return
    predicted = as_written(kept[PRETRAINED][UNLABELLED][0], job.labelled.classes)
    start = 0
    for test in job.labelled.unlabelled:
        values = predicted[start : start + len(test.examples)]
        start += len(test.examples)
        shown = [f"{v:.3f}" for v in values] if job.glue.regression else values
        write_server_file(folder / server_file(job.glue, test.name), test.indices, shown)


def render_glue(record: dict) -> None:
    """The GLUE table: one row a task (its official figures), a column a model, and the GLUE score."""
    wnli = "WNLI counted" if record["wnli_in_score"] else "WNLI not counted (as BERT)"
    cap = record["max_train_examples"]
    capped = f"at most {cap:,} training examples a task" if cap else "every training example"
    table = Table(
        title=f"GLUE dev ({wnli}; {capped}; {record['seeds']} seed(s), mode={record['mode']})", title_justify="left"
    )
    table.add_column("task")
    models = list(record["models"])
    for model in models:
        table.add_column(model.replace("_", " "), justify="right")
    for hf in record["models"][PRETRAINED]:
        cells = []
        for model in models:
            entry = record["models"][model][hf]
            cells.append(" / ".join(f"{k} {100 * v:.1f}" for k, v in entry["figures"].items()))
        table.add_row(record["results"][hf]["task"], *cells)
    table.add_row(
        "GLUE score", *(f"{100 * record['scores'][m]:.1f}" if record["scores"][m] is not None else "-" for m in models)
    )
    print_whole(table)
    console.print(
        f"record {record['record']}; dev predictions {record['dev_predictions']}; test files for the GLUE server "
        f"{record['test_predictions']} (seed {record['test_predictions_seed']})"
    )
