"""What an untrained model scores on each task lmpt ships, per architecture: the control row of every task card.

For each architecture (decoder: clm, encoder: mlm, encoder-decoder: span) the script makes the untrained control
as `lmpt-finetune control=scratch` makes it (lmpt.downstream.control.scratch_model):
1. `lmpt objective=OBJ trainer.max_steps=1 hydra.run.dir=OUT/ARCH`, every other key at its default (model=tiny,
   data=shakespeare, trainer.seed=1337): the run's tokenizer, trained on the default corpus (not the model's
   pre-training), and its config;
2. the run's model.safetensors replaced by `scratch_model` of the run: its objective's model at the run's size,
   freshly initialised from trainer.seed, the weights the run started from and the very control lmpt-finetune
   fine-tunes beside any default run of that objective. The run's best/ and checkpoints/ (one step of training)
   are removed, so nothing in OUT/ARCH holds trained weights.
Then each task is scored as a user scores it, every option at its default:
- zero-shot (multiple choice, minimal pairs): `lmpt-eval OUT/ARCH task=bundled:NAME json=true`;
- classification: `lmpt-finetune OUT/ARCH task=bundled:NAME json=true control=none` (mode=probe, lr=search, 3
  seeds): the run IS the control, so control=scratch would fine-tune the same weights a second time, its control row
  equal to this one bit for bit (tests/scripts/test_task_cards.py checks it). The bag-of-words floor it prints beside
  a control is computed once per task by the same function (lmpt.downstream.floors), with the majority
  class.

Every command's JSON goes to OUT.json (--json) and a table to docs/tasks.md between `<!-- task-cards:start -->` and
`<!-- task-cards:end -->` (--doc), under "What an untrained model scores (the control)", with the command, the date
and the machine.

    python scripts/task_cards.py                      # every architecture and shipped task (full blimp: hours of PLL)
    python scripts/task_cards.py --tasks shakespeare-cloze blimp-fast shakespeare-order clinc-domains
    python scripts/task_cards.py --architectures decoder --tasks my-task/ --run model.n_layers=1 --finetune seeds=1
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import textwrap
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

REPO = Path(__file__).resolve().parents[1]
OBJECTIVES = {"decoder": "clm", "encoder": "mlm", "encoder-decoder": "span"}
"""The objective whose untrained model stands for each architecture (lmpt.config.schema.ARCHITECTURES)."""
START, END = "<!-- task-cards:start -->", "<!-- task-cards:end -->"
HEADING = "## What an untrained model scores (the control)"
console = Console()


@dataclass(frozen=True)
class CardTask:
    """A task to score: its name, kind (zero-shot or classification) and the command options that name it."""

    name: str
    kind: str
    options: tuple[str, ...]
    files: dict[str, str] = field(default_factory=dict)
    """A classification task's split files (train, dev, test): what the bag-of-words floor reads."""


def refuse(message: str) -> NoReturn:
    """One line on stderr and exit 2, before any work (as lmpt's own commands refuse bad input)."""
    print(f"task_cards: error: {message}", file=sys.stderr)
    sys.exit(2)


def shipped_tasks() -> list[str]:
    """Every task lmpt ships: the zero-shot files of lmpt/tasks, then its classification folders, each sorted."""
    from lmpt.downstream.bundled import bundled_classification_tasks, tasks_dir

    zero_shot = sorted({p.name.split(".")[0] for p in tasks_dir().glob("*.jsonl*")})
    return zero_shot + bundled_classification_tasks()


def card_task(given: str) -> CardTask:
    """A --tasks entry: a shipped task's name, a folder holding train.jsonl and dev.jsonl (classification) or a
    .jsonl file (zero-shot)."""
    from lmpt.downstream.bundled import (
        BUNDLED_PREFIX,
        SPLITS,
        bundled_classification_tasks,
        resolve_task,
        task_folder,
        task_name,
    )
    from lmpt.errors import LmptError

    path = Path(given).expanduser()
    bundled = not path.exists()
    argument = BUNDLED_PREFIX + given if bundled else str(path.resolve())
    try:
        if path.is_dir() or (bundled and given in bundled_classification_tasks()):
            name, data = task_folder(argument, "--tasks")
            files = {split: getattr(data, split) for split in SPLITS if getattr(data, split) is not None}
            named = [f"task={argument}"] if bundled else [f"task={name}", *(f"data.{s}={p}" for s, p in files.items())]
            return CardTask(name, "classification", tuple(named), files)
        resolve_task(argument)
    except LmptError as error:
        refuse(f"--tasks {given}: {error} (shipped: {', '.join(shipped_tasks())})")
    return CardTask(task_name(argument), "zero-shot", (f"task={argument}",))


def lmpt(module: str, *args: str) -> str:
    """Run an lmpt command (`python -m MODULE ARGS`, what its entry point runs); its stdout. A failure ends the
    script with the command and the end of its output."""
    done = subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    if done.returncode != 0:
        console.print(f"[red]{module} {shlex.join(args)} failed ({done.returncode}):[/]\n{done.stdout[-2000:]}")
        console.print(done.stderr[-3000:], markup=False)
        sys.exit(1)
    return done.stdout


def make_control(arch: str, run_dir: Path, overrides: list[str]) -> dict:
    """The untrained run of `arch` in `run_dir` (the module docstring's steps 1 and 2); what it is, as a dict."""
    from lmpt.downstream.control import scratch_model
    from lmpt.rundir.directory import save_final_model
    from lmpt.rundir.trained import load_trained

    args = [
        f"objective={OBJECTIVES[arch]}",
        "trainer.max_steps=1",
        *overrides,
        f"hydra.run.dir={run_dir}",
        "trainer.progress=plain",
        "trainer.sample_tokens=0",
    ]
    lmpt("lmpt", *args)
    trained = load_trained(run_dir)
    untrained = scratch_model(trained)
    save_final_model(run_dir, untrained.state_dict(), trained.arch, trained.model.vocab_size)
    for one_step in ("best", "checkpoints"):
        shutil.rmtree(run_dir / one_step, ignore_errors=True)
    config = trained.config
    return {
        "objective": trained.objective_name,
        "arch": trained.arch,
        "run": str(run_dir),
        "command": shlex.join(args),
        "model": str(config.model.get("name", "")),
        "parameters": sum(p.numel() for p in untrained.parameters()),
        "init_seed": int(config.trainer.seed),
        "vocab_size": trained.tokenizer.vocab_size,
        "tokenizer_vocab": int(config.tokenizer.vocab_size),
        "seq_len": int(config.data.seq_len),
    }


def floors(task: CardTask) -> dict:
    """A classification task's bag-of-words floor (lmpt-finetune's, same function and files) and the accuracy of
    always answering the most common training label on dev and test (its majority_accuracy, on each split)."""
    from lmpt.downstream.floors import bag_of_words_floor
    from lmpt.downstream.labelled import read_labelled
    from lmpt.downstream.labelled_files import TaskData

    labelled = read_labelled(TaskData(**task.files), task.name)
    majority = Counter(e.label for e in labelled.examples["train"]).most_common(1)[0][0]
    shares = {
        f"{split}_majority": sum(e.label == majority for e in examples) / len(examples)
        for split, examples in labelled.examples.items()
        if split != "train"
    }
    return {"bag_of_words": bag_of_words_floor(labelled.examples, labelled.classes), "majority": majority, **shares}


def score(run_dir: Path, task: CardTask, finetune: list[str]) -> dict:
    """The task scored on the untrained run as a user scores it (lmpt-eval or lmpt-finetune, json=true)."""
    if task.kind == "zero-shot":
        out = lmpt("lmpt.downstream.eval_cli", str(run_dir), *task.options, "json=true")
    else:
        out = lmpt("lmpt.downstream.finetune_cli", str(run_dir), *task.options, "json=true", "control=none", *finetune)
    return json.loads(out)


def interval(figure: dict, key: str) -> str:
    return f"{figure[key]:.3f} [{figure[key + '_low']:.3f}, {figure[key + '_high']:.3f}]"


def spread(result: dict, key: str) -> str:
    std = result[f"{key}_std"]
    return f"{result[f'{key}_mean']:.3f}" + ("" if std is None else f" ± {std:.3f}")


def task_rows(task: str, by_arch: dict[str, dict], extra: dict) -> list[list[str]]:
    """The table rows of one task: [task, figure, one cell per architecture, chance or majority, bag of words]; the
    kind of task is the one the downstream codec reads in its results."""
    from lmpt.downstream.kinds.classification import ClassificationResult
    from lmpt.downstream.kinds.pairs import PairsResult
    from lmpt.downstream.records import decode

    some = next(iter(by_arch.values()))
    kind = type(decode(some))
    if kind is ClassificationResult:
        bow = extra["bag_of_words"]
        seeds = f"{some['seeds']} seed{'s' * (some['seeds'] > 1)}"
        rows = [
            [
                f"dev accuracy ({some['dev_examples']:,}), {some['mode']}, {seeds}",
                *(spread(r, "accuracy") for r in by_arch.values()),
                f"{extra['dev_majority']:.3f} (majority)",
                f"{bow['accuracy']:.3f}",
            ]
        ]
        if "test_examples" in some:
            rows.append(
                [
                    f"test accuracy ({some['test_examples']:,})",
                    *(spread(r, "test_accuracy") for r in by_arch.values()),
                    f"{extra['test_majority']:.3f} (majority)",
                    f"{bow['test_accuracy']:.3f}",
                ]
            )
    elif kind is PairsResult:
        rows = [
            [
                f"accuracy ({some['n']:,} pairs)",
                *(interval(r, "accuracy") for r in by_arch.values()),
                f"{some['chance']:.2f} (chance); fewer tokens wins: {some['length_baseline']:.3f}",
                "",
            ]
        ]
        equal = [r["equal_length"] for r in by_arch.values()]
        cells = [f"{e['accuracy']:.3f} [{e['interval'][0]:.3f}, {e['interval'][1]:.3f}] (n={e['n']:,})" for e in equal]
        rows.append(["accuracy on the pairs of equal token length", *cells, f"{some['chance']:.2f} (chance)", ""])
    else:  # multiple choice
        rows = [
            [
                f"accuracy ({some['n']:,} questions)",
                *(interval(r, "accuracy") for r in by_arch.values()),
                f"{some['chance']:.2f} (chance)",
                "",
            ],
            [
                "accuracy_norm (per byte)",
                *(interval(r, "accuracy_norm") for r in by_arch.values()),
                f"{some['chance']:.2f} (chance)",
                "",
            ],
        ]
    return [[f"`{task}`" if i == 0 else "", *row] for i, row in enumerate(rows)]


def card_section(record: dict) -> str:
    """The Markdown between the markers: how the figures were made, the table, the fine-tuning recipes."""
    archs, runs = record["architectures"], record["runs"]
    first = runs[archs[0]]
    finetune = " ".join(["json=true", "control=none", *record["finetune"]])
    about = (
        f"Measured {record['date']} by `{record['command']}` (lmpt {record['commit']}) on {record['machine']}; "
        f"{record['wall_min']:.0f} min in all. Each architecture's untrained model is its objective's "
        f"{first['model']} model freshly initialised from trainer.seed {first['init_seed']} "
        "(`lmpt.downstream.control.scratch_model` of a default run: the control `lmpt-finetune` fine-tunes beside "
        "it), with that run's tokenizer. Zero-shot tasks are scored by `lmpt-eval RUN task=bundled:NAME json=true`, "
        f"classification tasks by `lmpt-finetune RUN task=bundled:NAME {finetune}` (every other option at its "
        "default: mode=probe, lr=search, seeds=3). " + record.get("cut", "")
    )
    notes = (
        "Zero-shot cells: accuracy [lmpt's 95% bootstrap interval over items]; fine-tuned cells: mean ± sample std "
        "over seeds (lmpt gives an interval only to a gain over the control). Bag of words: lmpt-finetune's floor, "
        "tf-idf 1-2 grams + logistic regression; majority: always the most common training label."
    )
    head = ["task", "figure", *(f"{a} ({runs[a]['objective']})" for a in archs), "chance / majority", "bag of words"]
    lines = [
        *wrapped(about),
        "",
        "| " + " | ".join(head) + " |",
        "| " + " | ".join(["---", "---", *["---:"] * (len(head) - 2)]) + " |",
    ]
    for task, entry in record["tasks"].items():
        by_arch = {a: record["results"][a][task] for a in archs}
        lines += ["| " + " | ".join(row) + " |" for row in task_rows(task, by_arch, entry)]
    lines += ["", *wrapped(notes)]
    recipes = [
        f"`{t}` " + ", ".join(f"{a} lr {r[t]['lr']:g} {r[t]['pooling']}" for a, r in record["results"].items())
        for t, e in record["tasks"].items()
        if e["kind"] == "classification"
    ]
    if recipes:
        lines += ["", *wrapped("Fine-tuning recipes (searched unless fixed): " + "; ".join(recipes) + ".")]
    took = [f"`{t}` " + " / ".join(f"{record['seconds'][a][t]:.0f}" for a in archs) for t in record["tasks"]]
    lines += ["", *wrapped(f"Seconds each scoring took ({' / '.join(archs)}): " + "; ".join(took) + ".")]
    return "\n".join(lines)


def wrapped(text: str) -> list[str]:
    """A paragraph in lines of at most 120 characters, as the docs are written (a longer word stays whole)."""
    return textwrap.wrap(text.strip(), 120, break_long_words=False, break_on_hyphens=False)


def write_section(doc: Path, section: str) -> None:
    """Put `section` between the markers of `doc`, the rest untouched; without markers, append the heading and
    the markers holding it."""
    text = doc.read_text(encoding="utf-8") if doc.exists() else ""
    block = f"{START}\n{section}\n{END}"
    if START in text and END in text.split(START, 1)[1]:
        before, rest = text.split(START, 1)
        text = before + block + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + ("\n\n" if text else "") + f"{HEADING}\n\n{block}\n"
    doc.write_text(text, encoding="utf-8")


def machine() -> str:
    load = os.getloadavg()[0]
    return f"{os.cpu_count()} CPU cores ({platform.machine()}, {platform.system()}), load average {load:.1f}"


def commit() -> str:
    done = subprocess.run(["git", "-C", str(REPO), "describe", "--always", "--dirty"], capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def measure(args: argparse.Namespace, tasks: list[CardTask], command: str) -> dict:
    """Make each architecture's untrained run and score every task on it, with a progress bar over the steps; the
    record of what was run and every figure."""
    began, start_machine = time.perf_counter(), machine()
    record: dict = {
        "command": command,
        "date": datetime.date.today().isoformat(),
        "commit": commit(),
        "cut": args.cut,
        "finetune": args.finetune,
        "architectures": args.architectures,
        "runs": {},
        "results": {},
        "seconds": {},
        "tasks": {t.name: {"kind": t.kind} for t in tasks},
    }
    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console) as progress:
        bar = progress.add_task("task cards", total=len(args.architectures) * (1 + len(tasks)))
        for task in (t for t in tasks if t.kind == "classification"):
            record["tasks"][task.name] |= floors(task)
            bow = record["tasks"][task.name]["bag_of_words"]["accuracy"]
            progress.console.print(f"{task.name}: bag of words {bow:.3f} (dev)")
        for arch in args.architectures:
            progress.update(bar, description=f"{arch}: untrained run (lmpt {OBJECTIVES[arch]}, 1 step, weights reset)")
            record["runs"][arch] = make_control(arch, args.out / arch, args.run)
            progress.advance(bar)
            record["results"][arch], record["seconds"][arch] = {}, {}
            for task in tasks:
                progress.update(bar, description=f"{arch}: {task.name} ({task.kind})")
                started = time.perf_counter()
                result = record["results"][arch][task.name] = score(args.out / arch, task, args.finetune)
                took = record["seconds"][arch][task.name] = round(time.perf_counter() - started, 1)
                figure = spread(result, "accuracy") if task.kind == "classification" else interval(result, "accuracy")
                progress.console.print(f"{arch} {task.name}: accuracy {figure} ({took:.0f} s)")
                progress.advance(bar)
    record["wall_min"] = (time.perf_counter() - began) / 60
    record["machine"] = f"{start_machine} at the start, {os.getloadavg()[0]:.1f} at the end (shared)"
    return record


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--architectures", nargs="+", default=list(OBJECTIVES), help="default: all three")
    parser.add_argument("--tasks", nargs="+", help="shipped task names, task folders or .jsonl files (default: all)")
    parser.add_argument("--out", type=Path, default=Path("outputs/task-cards"), help="one untrained run per arch")
    parser.add_argument("--json", type=Path, help="every figure, as JSON (default: OUT.json, beside OUT)")
    parser.add_argument("--doc", type=Path, default=REPO / "docs" / "tasks.md", help="the Markdown file to update")
    parser.add_argument("--run", nargs="*", default=[], help="extra lmpt overrides for the runs (KEY=VALUE)")
    parser.add_argument("--finetune", nargs="*", default=[], help="extra lmpt-finetune options (KEY=VALUE)")
    parser.add_argument("--cut", default="", help="a sentence for the doc: what was left out and why")
    parser.add_argument("--from-json", action="store_true", help="score nothing: write the doc from the JSON")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    json_path = args.json or args.out.with_suffix(".json")
    if args.from_json:
        if not json_path.is_file():
            refuse(f"--from-json: {json_path} does not exist: give the JSON a run wrote with --json")
        record = json.loads(json_path.read_text()) | ({"cut": args.cut} if args.cut else {})
    else:
        unknown = [a for a in args.architectures if a not in OBJECTIVES]
        if unknown:
            refuse(f"--architectures {' '.join(unknown)}: use {', '.join(OBJECTIVES)}")
        tasks = [card_task(t) for t in args.tasks or shipped_tasks()]
        taken = [args.out / arch for arch in args.architectures if (args.out / arch).exists()]
        if taken:
            refuse(f"{taken[0]} exists: remove it or give another --out")
        shown = list(sys.argv[1:] if argv is None else argv)
        if "--cut" in shown:  # prose for the doc, not part of what was measured: the doc prints it anyway
            del shown[shown.index("--cut") : shown.index("--cut") + 2]
        record = measure(args, tasks, shlex.join(["python", "scripts/task_cards.py", *shown]))
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(record, indent=1) + "\n")
    section = card_section(record)
    write_section(args.doc, section)
    console.print(section, markup=False, soft_wrap=True)
    console.print(f"figures: {json_path}; table: {args.doc}")


if __name__ == "__main__":
    main()
