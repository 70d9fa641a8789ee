"""Fake run and sweep directories shaped like the ones `lmpt` writes (see a real `lmpt -m ...` sweep)."""

from __future__ import annotations

import json
import os
from pathlib import Path

SHARED = ["tokenizer.vocab_size=1024", "data.seq_len=64", "trainer.batch_size=8", "trainer.max_steps=20"]


def train_record(step: int, loss: float, tokens_per_s: float, **extra: float) -> dict:
    return {
        "step": step,
        "loss": loss,
        "acc": 0.03,
        "ppl": 2.718281828**loss,
        "lr": 4.1e-4,
        "grad_norm": 1.19,
        "tokens_per_s": tokens_per_s,
        "loss_tokens_per_s": tokens_per_s,
        "mfu": 0.86,
        "peak_memory_mb": 391.44,
        **extra,
    }


def eval_record(step: int, val_loss: float, **extra: float) -> dict:
    return {"step": step, "val_loss": val_loss, "val_acc": 0.04, "val_ppl": 2.718281828**val_loss, **extra}


def make_run(
    path: Path,
    overrides: list[str],
    records: list[dict] | None = None,
    objective: str = "clm",
    status: dict | None = None,
    final_model: bool = True,
    torn_tail: bool = False,
) -> Path:
    """A job directory: .hydra/, config.yaml, metrics.jsonl, checkpoints/, model.safetensors and status.json
    as asked."""
    (path / ".hydra").mkdir(parents=True)
    (path / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
    (path / ".hydra" / "config.yaml").write_text(f"objective:\n  name: {objective}\n")
    (path / "config.yaml").write_text(
        f"tokenizer:\n  vocab_size: 1024\nobjective:\n  name: {objective}\n  document_attention: false\n"
        "model:\n  name: tiny\n  arch: auto\n"
    )
    if records is not None:
        lines = "".join(json.dumps(r) + "\n" for r in records)
        (path / "metrics.jsonl").write_text(lines + ('{"step": 30, "loss": 6.1' if torn_tail else ""))
        (path / "checkpoints" / "step_00000010").mkdir(parents=True)
        (path / "checkpoints" / "step_00000010" / "manifest.json").write_text("{}")
    if final_model:
        (path / "model.safetensors").write_bytes(b"not a real model")
    if status is not None:
        (path / "status.json").write_text(json.dumps(status))
    return path


def make_sweep(root: Path) -> Path:
    """A sweep of five jobs: two completed (one UL2-style with per-denoiser losses), one failed, one still
    running, and job 10 (preempted) to check that job 2 sorts before it."""
    sweep = root / "multirun" / "2026-11-21" / "05-21-56"
    sweep.mkdir(parents=True)
    (sweep / "multirun.yaml").write_text("hydra:\n  sweep:\n    dir: multirun/2026-11-21/05-21-56\n")
    make_run(
        sweep / "0",
        [*SHARED, "optimizer.lr=0.001"],
        [
            train_record(10, 6.9, 1000.0),
            eval_record(10, 6.7),
            train_record(20, 6.6, 9000.0),
            eval_record(20, 6.4),
            train_record(30, 6.5, 8000.0),
            eval_record(30, 6.3),
        ],
        status={"status": "completed", "wall_s": 12.5},
    )
    make_run(
        sweep / "1",
        [*SHARED, "optimizer.lr=0.003", "objective=ul2-mixture"],
        [
            train_record(10, 6.8, 4000.0, **{"loss/R3-0.15": 6.9, "loss/S": 6.5}),
            eval_record(10, 6.5, **{"val_loss/R3-0.15": 6.6, "val_loss/S": 6.2}),
            train_record(20, 6.2, 6000.0, **{"loss/R3-0.15": 6.3, "loss/S": 6.0}),
            eval_record(20, 5.9, **{"val_loss/R3-0.15": 6.0, "val_loss/S": 5.7}),
        ],
        objective="ul2-mixture",
        status={"status": "completed", "wall_s": 75.0},
    )
    make_run(
        sweep / "2",
        [*SHARED, "optimizer.lr=bad"],
        None,
        final_model=False,
        status={"status": "failed", "error": "optimizer.lr=bad: not a number"},
    )
    running = make_run(
        sweep / "3",
        [*SHARED, "optimizer.lr=0.01"],
        [train_record(10, 7.0, 5000.0), eval_record(10, 6.9), train_record(20, 6.8, 7000.0)],
        final_model=False,
        torn_tail=True,
    )
    os.utime(running / ".hydra" / "overrides.yaml", (1_000_000, 1_000_000))
    os.utime(running / ".hydra" / "config.yaml", (1_000_000, 1_000_000))
    os.utime(running / "metrics.jsonl", (1_000_042, 1_000_042))
    make_run(
        sweep / "10",
        [*SHARED, "optimizer.lr=0.03"],
        [train_record(10, 7.1, 3000.0)],
        final_model=False,
        status={"status": "preempted", "step": 10},
    )
    return sweep


def fine_tuned_run(
    path: Path,
    objective: str,
    per_seed: list[float],
    gain: tuple[float, float, float] | None = None,
    scratch: float = 0.55,
    task: str = "order",
) -> Path:
    """A completed run that fine-tuned `task` when training ended, as lmpt.downstream.run_tasks logs and records
    it: dev accuracy per seed, the majority class, and with `gain` (gain, low, high) its scratch control."""
    mean = sum(per_seed) / len(per_seed)
    figures = {"accuracy_mean": mean, "majority_accuracy": 0.5}
    seeds = [{"seed": i, "accuracy": a, "macro_f1": a} for i, a in enumerate(per_seed)]
    record: dict = {"task": task, "mode": "probe", "accuracy_mean": mean, "per_seed": seeds}
    if gain is not None:
        figures |= {"scratch_accuracy_mean": scratch, "accuracy_gain": gain[0], "bow_accuracy": 0.6}
        entry = {
            "pretrained": mean,
            "scratch": scratch,
            "gain": gain[0],
            "interval": [gain[1], gain[2]],
            "significant": not gain[1] <= 0 <= gain[2],
        }
        record |= {"control": "scratch", "scratch": {"accuracy_mean": scratch}, "gain": {"accuracy": entry}}
    logged = {"step": 10, **{f"downstream/{task}/{k}": v for k, v in figures.items()}}
    make_run(
        path,
        [*SHARED, f"objective={objective}"],
        [train_record(10, 5.2, 4000.0), eval_record(10, 5.0), logged],
        objective=objective,
        status={"status": "completed"},
    )
    (path / "downstream").mkdir()
    (path / "downstream" / f"{task}.json").write_text(json.dumps(record))
    return path
