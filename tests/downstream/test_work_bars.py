"""The progress bars of downstream scoring: each names the task and the phase running (captured from a recording
terminal console), and each total is the work done (the bar ends exactly full: a total in other units than the
advances is what made the time left jump)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf
from rich.console import Console

import lmpt.inference.progress as progress
from lmpt.config.schema import ModelConfig
from lmpt.downstream.finetune import finetune
from lmpt.downstream.kinds.pairs import MinimalPairs
from lmpt.downstream.labelled_files import TaskData
from lmpt.downstream.options import FinetuneOptions
from lmpt.downstream.task import Scoring, read_task
from lmpt.downstream.zero_shot_files import MinimalPair
from lmpt.model import build_model
from lmpt.rundir.trained import Trained

PAIRS = [
    MinimalPair("The cats sleep.", "The cats sleeps.", "morphology", "agreement"),
    MinimalPair("Who did you see?", "Who did you see him?", "syntax", "island"),
    MinimalPair("She herself left in the morning.", "She himself left.", "morphology", "anaphor"),
]


def _trained(shakespeare, arch: str, objective: str) -> Trained:
    torch.manual_seed(0)
    cfg = ModelConfig(name="tiny", d_model=32, n_layers=1, n_heads=2, ffn_dim=64, max_seq_len=64)
    model = build_model(cfg, arch, shakespeare.tokenizer.vocab_size, shakespeare.tokenizer.special.pad).eval()
    config = OmegaConf.create({"data": {"seq_len": 32}, "trainer": {"seed": 0}})
    return Trained(model, shakespeare.tokenizer, config, arch, objective, Path("unused"))


@pytest.fixture
def bars(monkeypatch: pytest.MonkeyPatch) -> tuple[Console, list[progress.WorkBar]]:
    """A recording terminal console under every WorkBar, and each bar once it has closed."""
    terminal = Console(record=True, force_terminal=True, force_interactive=True, width=200, file=io.StringIO())
    monkeypatch.setattr(progress, "console", terminal)
    closed: list[progress.WorkBar] = []
    exit_bar = progress.WorkBar.__exit__

    def closing(bar: progress.WorkBar, *exc: object) -> None:
        closed.append(bar)
        exit_bar(bar, *exc)

    monkeypatch.setattr(progress.WorkBar, "__exit__", closing)
    return terminal, closed


def _ended_full(bar: progress.WorkBar) -> bool:
    (task,) = bar.progress.tasks
    return task.total is not None and task.total > 0 and task.completed == task.total


def test_a_bundled_task_is_named_by_what_it_reads() -> None:
    assert read_task("bundled:blimp-fast").name == "blimp-fast"


@pytest.mark.parametrize(("arch", "objective"), [("decoder", "clm"), ("encoder", "mlm")])
def test_a_zero_shot_bar_names_its_task_and_ends_full(shakespeare, bars, arch: str, objective: str) -> None:
    terminal, closed = bars
    task = MinimalPairs(name="blimp-fast", items=PAIRS, how=Scoring(batch_size=2))
    task.evaluate(_trained(shakespeare, arch, objective))
    assert "blimp-fast zero-shot" in terminal.export_text()
    (bar,) = closed
    assert _ended_full(bar)  # encoders count the tokens of the masked copies: the total is that sum


@pytest.fixture(scope="module")
def task(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A two-class task of 120 training lines (enough for lr=search), 8 dev and 6 test lines."""
    lines = (Path(__file__).resolve().parents[2] / "lmpt/corpora/tinyshakespeare.txt").read_text().splitlines()
    lines = [line for line in lines if len(line) > 20]
    root, files = tmp_path_factory.mktemp("order"), {}
    for split, (start, n) in {"train": (0, 120), "dev": (200, 8), "test": (300, 6)}.items():
        rows = [{"text": text, "label": i % 2} for i, text in enumerate(lines[start : start + n])]
        files[split] = str(root / f"{split}.jsonl")
        Path(files[split]).write_text("".join(json.dumps(r) + "\n" for r in rows))
    return files


FULL_SEED = 3 * 32 + 8 + 6
"""One full seed's work in examples through the body: 2 steps of 16 examples trained (a trained example weighs three
passes: forward and backward), then the dev and test examples read."""


@pytest.mark.parametrize(
    ("mode", "lr", "phases", "total"),
    [
        ("full", None, ["order fine-tune seed 1/2", "order fine-tune seed 2/2"], 2 * FULL_SEED),
        # a probe reads every example once for its features; its head's steps weigh nothing
        ("probe", None, ["order probe features", "order probe seed 1/2", "order probe seed 2/2"], 120 + 8 + 6),
        # two candidates trained on 102 examples (18 held back and read), then the two seeds
        (
            "full",
            "search",
            [
                "order fine-tune recipe search 1/2 (lr 0.0001, last pooling)",
                "order fine-tune recipe search 2/2 (lr 0.001, last pooling)",
                "order fine-tune seed 2/2",
            ],
            2 * (3 * 32 + 18) + 2 * FULL_SEED,
        ),
    ],
)
def test_a_fine_tuning_bar_names_task_and_phase_and_ends_full(shakespeare, bars, task, mode, lr, phases, total) -> None:
    terminal, closed = bars
    data = TaskData(task["train"], task["dev"], task["test"])
    options = FinetuneOptions(
        data=data,
        task="order",
        mode=mode,
        seeds=2,
        max_steps=2,
        batch_size=16,
        lr=lr,
        lr_grid=[1e-4, 1e-3],
        control="none",
        seq_len=16,
    )
    finetune(_trained(shakespeare, "decoder", "clm"), options)
    shown = terminal.export_text()
    assert all(phase in shown for phase in phases), shown[-2000:]
    (bar,) = closed
    assert bar.progress.tasks[0].total == total
    assert _ended_full(bar)
