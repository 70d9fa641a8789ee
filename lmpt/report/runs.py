"""What a run directory says about its run: overrides, status, final evaluation, speed, curves."""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

from omegaconf import OmegaConf
from rich.markup import escape

from lmpt.console import warn
from lmpt.downstream.figures import METRIC_PREFIX
from lmpt.errors import LmptError
from lmpt.safe_files import UnsafeFile, load_yaml

CONFIG_FILE = "config.yaml"  # the names lmpt.rundir.directory writes; not imported so reports skip torch
METRICS_FILE = "metrics.jsonl"
FINAL_MODELS = ("model.safetensors", "model.pt")  # the second from lmpt before safetensors
STATUS_FILE = "status.json"
HYDRA_DIR = ".hydra"
OVERRIDES_FILE = f"{HYDRA_DIR}/overrides.yaml"
RUN_MARKERS = (METRICS_FILE, CONFIG_FILE, HYDRA_DIR, STATUS_FILE)
DOWNSTREAM = METRIC_PREFIX  # prefix of the figures lmpt.downstream.run_tasks logs
HEADLINE_KEYS = ("val_loss", "val_ppl", "val_fixed_loss", "val_fixed_ppl")  # columns of their own; other val_* keys
# are objective measures


@dataclass
class RunSummary:
    """One run, as its directory records it."""

    path: Path
    name: str
    """The command-line overrides as `key=value ...`, or the directory name when there are none."""
    overrides: list[str]
    objective: str | None
    status: str
    """completed, failed: <error>, preempted, or incomplete (still running, or killed)."""
    step: int | None
    """The last step any record names."""
    val_loss: float | None
    """At the run's own objective settings (an mlm run: its own training mask_prob)."""
    val_ppl: float | None
    fixed_loss: float | None = None
    """Masked-token loss at the shared objective.eval_mask_prob (mlm, nsp): comparable across masking rates."""
    fixed_ppl: float | None = None
    eval_mask_prob: float | None = None
    measures: dict[str, float] = field(default_factory=dict)
    """The last evaluation's other `val_*` values (val_acc, val_nsp_acc, val_loss/R3-0.15, ...)."""
    tokens_per_s: float | None = None
    """Median over the training records."""
    loss_tokens_per_s: float | None = None
    """Median over the training records: tokens that carried loss, per second."""
    flops: float | None = None
    """Training FLOPs spent by the last record."""
    wall_s: float | None = None
    """Training wall time over every launch (status.json's train_s; an older run's: its last launch's wall_s)."""
    downstream_s: float | None = None
    """Seconds spent scoring the downstream tasks after training."""
    val_curve: list[tuple[int, float]] = field(default_factory=list)
    fixed_curve: list[tuple[int, float]] = field(default_factory=list)
    train_curve: list[tuple[int, float]] = field(default_factory=list)
    compute_at: dict[int, tuple[float, int]] = field(default_factory=dict)
    """step -> (cumulative FLOPs, cumulative loss-bearing tokens), from the records that carry them."""
    downstream: dict[str, float] = field(default_factory=dict)
    """The latest `downstream/TASK/FIGURE` values (the downstream config group's tasks, scored when training ends)."""
    seed: int | None = None
    """trainer.seed, from config.yaml (None when it does not say)."""
    model: str | None = None
    """model.name (the size preset), from config.yaml."""
    shape: str | None = None
    """The model's shape (model.name with its d_model, n_layers, n_heads, ffn_dim and the tokenizer's vocabulary):
    two sizes that share a name are never pooled."""
    unique_tokens: int | None = None
    """data.unique_tokens, from config.yaml: the training text held to its first N tokens (None: all of it)."""
    budget: str | None = None
    """trainer.budget, from config.yaml (None: the run trained for trainer.max_steps)."""
    epochs: float | None = None
    """The epochs over the training text the run recorded in status.json (None when it did not)."""
    members: list[RunSummary] = field(default_factory=list)
    """A setting's runs over several seeds pooled into this one row (lmpt.report.seed_pool); empty for one run."""

    @property
    def seeds(self) -> list[int | None]:
        """The seeds this row stands for: its members', or its own."""
        return [m.seed for m in self.members] if self.members else [self.seed]


def is_run_dir(path: Path) -> bool:
    return path.is_dir() and any((path / marker).exists() for marker in RUN_MARKERS)


def natural_key(path: Path) -> list:
    """Sort key that puts job 2 before job 10."""
    return [int(part) if part.isdecimal() else part for part in re.split(r"(\d+)", str(path))]


def find_runs(paths: Sequence[Path | str]) -> list[RunSummary]:
    """Every run under `paths`: each a run directory, or a sweep directory (or any parent) searched for them."""
    found: list[Path] = []
    for path in map(Path, paths):
        if not path.exists():
            raise LmptError(f"{path} does not exist: name a run directory or a directory that holds runs")
        found.extend(_run_dirs_under(path))
    unique = list(dict.fromkeys(p.resolve() for p in found))
    names = ", ".join(str(p) for p in paths)
    if not unique:
        raise LmptError(f"no run directories (with {METRICS_FILE}, {CONFIG_FILE} or {HYDRA_DIR}/) under {names}")
    runs = [read_run(p) for p in unique]
    if all(r.step is None for r in runs) and any(_step_records(p / METRICS_FILE) for p in unique):
        raise LmptError(
            f"nothing readable under {names}: every record of {METRICS_FILE} was of the wrong type "
            "(each file is named above); fix or move those records"
        )
    return runs


def missing_parts(run: RunSummary) -> list[str]:
    """What a run directory lacks for a comparison to read it whole, in words (none for a whole run): no logged
    step (its metrics.jsonl absent, empty or unreadable), or no config.yaml (its objective and settings unknown)."""
    missing = []
    if run.step is None:
        missing.append(f"its {METRICS_FILE} holds no step yet (nothing logged: a run that never reached a step)")
    if not (run.path / CONFIG_FILE).is_file():
        missing.append(f"it has no {CONFIG_FILE} (its objective and settings are unknown: it ranks beside no other)")
    return missing


def _run_dirs_under(path: Path) -> list[Path]:
    if is_run_dir(path):
        return [path]
    if not path.is_dir():
        return []
    children = sorted((p for p in path.iterdir() if p.is_dir() and not p.name.startswith(".")), key=natural_key)
    return [run for child in children for run in _run_dirs_under(child)]


def read_run(path: Path) -> RunSummary:
    """Summarize one run directory; missing files leave their fields empty."""
    records = read_records(path / METRICS_FILE)
    train = [r for r in records if "loss" in r]
    evals = [r for r in records if "val_loss" in r]
    last_eval = evals[-1] if evals else {}
    speeds = [r["tokens_per_s"] for r in train if r.get("tokens_per_s") is not None]
    loss_speeds = [r["loss_tokens_per_s"] for r in train if r.get("loss_tokens_per_s") is not None]
    counted = [r for r in records if isinstance(r.get("flops"), int | float) and "loss_tokens" in r]
    overrides = _overrides(path)
    config = _load_yaml(path / CONFIG_FILE)
    config = config if isinstance(config, dict) else {}
    objective = _section(config, "objective")
    seed = _section(config, "trainer").get("seed")
    unique_tokens, budget = _section(config, "data").get("unique_tokens"), _section(config, "trainer").get("budget")
    epochs = read_status(path).get("epochs")
    eval_mask_prob = objective.get("eval_mask_prob")
    return RunSummary(
        path=path,
        name=" ".join(overrides) or path.name,
        overrides=overrides,
        objective=objective.get("name"),
        status=_status(path),
        step=max((r["step"] for r in records), default=None),
        val_loss=last_eval.get("val_loss"),
        val_ppl=last_eval.get("val_ppl"),
        fixed_loss=last_eval.get("val_fixed_loss"),
        fixed_ppl=last_eval.get("val_fixed_ppl"),
        eval_mask_prob=float(eval_mask_prob) if isinstance(eval_mask_prob, int | float) else None,
        measures={k: v for k, v in last_eval.items() if k.startswith("val_") and k not in HEADLINE_KEYS},
        tokens_per_s=statistics.median(speeds) if speeds else None,
        loss_tokens_per_s=statistics.median(loss_speeds) if loss_speeds else None,
        flops=counted[-1]["flops"] if counted else None,
        wall_s=_wall_seconds(path),
        downstream_s=_seconds(read_status(path).get("downstream_s")),
        val_curve=[(r["step"], r["val_loss"]) for r in evals if r["val_loss"] is not None],  # null: non-finite
        fixed_curve=[(r["step"], r["val_fixed_loss"]) for r in evals if r.get("val_fixed_loss") is not None],
        compute_at={r["step"]: (r["flops"], r["loss_tokens"]) for r in counted},
        train_curve=[(r["step"], r["loss"]) for r in train if r["loss"] is not None],
        downstream={k: v for r in records for k, v in r.items() if k.startswith(DOWNSTREAM) and v is not None},
        seed=seed if isinstance(seed, int) and not isinstance(seed, bool) else None,
        model=str(_section(config, "model").get("name")) if _section(config, "model").get("name") else None,
        shape=_shape(config),
        unique_tokens=int(unique_tokens) if _is_number(unique_tokens) else None,
        budget=str(budget) if budget is not None else None,
        epochs=float(epochs) if _is_number(epochs) else None,
    )


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def wrong_type(record: dict) -> str:
    """Why `record` is not one lmpt writes (an integer step, every other value a number or null), or ""."""
    if not isinstance(record["step"], int) or isinstance(record["step"], bool):
        return f'"step" is {json.dumps(record["step"])}, not a whole number'
    for key, value in record.items():
        if value is not None and not _is_number(value):
            return f"{json.dumps(key)} is {json.dumps(value)[:40]}, not a number"
    return ""


def _step_records(path: Path) -> list[tuple[int, dict]]:
    """(line number, object) of every line of the file that parses as a JSON object with a step; a line cut short
    by a killed run is skipped."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    found, torn = [], []
    for number, line in enumerate(lines, 1):
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            torn.append(number)
            continue
        if isinstance(record, dict) and "step" in record:
            found.append((number, record))
    if torn:  # read on past it, but say so: a cut-off last record can hold the figures a table ranks by
        warn(escape(f"{path}: line {torn[-1]} is not a whole JSON record (cut short by a killed run?): skipped"))
    return found


def read_records(path: Path) -> list[dict]:
    """metrics.jsonl's records; a line cut short by a killed run is skipped, and a record of the wrong type (a figure
    that is not a number) is skipped with one warning naming the file."""
    records, skipped = [], []
    for number, record in _step_records(path):
        problem = wrong_type(record)
        if problem:
            skipped.append(f"line {number}: {problem}")
        else:
            records.append(record)
    if skipped:  # a report reads on past a hand-edited or foreign record: the rest of the run still counts
        many = f"{len(skipped)} records" if len(skipped) > 1 else "a record"
        warn(escape(f"{path}: skipped {many} of the wrong type ({skipped[0]})"))
    return records


def read_status(path: Path) -> dict:
    """status.json ({} when there is none); one that cannot be read is named once and read as {"status": UNREADABLE},
    never taken for a completed run."""
    file = path / STATUS_FILE
    try:
        status = json.loads(file.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        status = None
    if isinstance(status, dict):
        return status
    if file not in _UNREADABLE:
        _UNREADABLE.add(file)
        warn(escape(f"{file} cannot be read: the run is shown as '{UNREADABLE}', not as completed"))
    return {"status": UNREADABLE}


UNREADABLE = "unreadable status.json"
_UNREADABLE: set[Path] = set()


def _status(path: Path) -> str:
    status = read_status(path)
    state = status.get("status")
    if state == "failed":
        return f"failed: {status.get('error', 'unknown error')}"
    if state in ("completed", "preempted", UNREADABLE):
        return state
    if state == "scoring":  # killed while scoring its downstream tasks: the same command finishes it
        return "incomplete"
    return "completed" if any((path / name).exists() for name in FINAL_MODELS) else "incomplete"


def _load_yaml(path: Path) -> Any:
    """The file's contents, or None when it is missing or unreadable (a report never stops at one bad run).
    A file that could run code (a `!!python` tag) is refused, naming it: that is an attack, not damage."""
    try:
        return OmegaConf.to_container(load_yaml(path))
    except UnsafeFile:
        raise
    except (OSError, LmptError):
        return None


def _overrides(path: Path) -> list[str]:
    overrides = _load_yaml(path / OVERRIDES_FILE)
    return [str(o) for o in overrides] if isinstance(overrides, list) else []


def _shape(config: dict) -> str | None:
    """The model's name and the sizes that make its shape, as one string (None without a model section)."""
    model = _section(config, "model")
    if not model:
        return None
    sizes = [f"{key}={model[key]}" for key in ("d_model", "n_layers", "n_heads", "ffn_dim") if key in model]
    vocab = _section(config, "tokenizer").get("vocab_size")
    return " ".join([str(model.get("name")), *sizes, *([f"vocab={vocab}"] if vocab is not None else [])])


def _section(config: dict, name: str) -> dict:
    """A section of the run's config.yaml (empty when it is missing or not a mapping)."""
    section = config.get(name)
    return section if isinstance(section, dict) else {}


def _seconds(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def _wall_seconds(path: Path) -> float | None:
    """status.json's train_s (training over every launch), else its wall_s (the last launch: runs written before
    train_s), else the span from Hydra's first file to the last file the run wrote."""
    status = read_status(path)
    wall = _seconds(status.get("train_s"))
    if wall is None:
        wall = _seconds(status.get("wall_s"))
    if wall is not None:
        return wall
    start = [p.stat().st_mtime for p in (path / HYDRA_DIR).glob("*.yaml")]
    written = (path / METRICS_FILE, *(path / name for name in FINAL_MODELS), path / STATUS_FILE)
    end = [p.stat().st_mtime for p in written if p.exists()]
    if not start or not end:
        return None
    return max(max(end) - min(start), 0.0)
