"""Issue 32, broken promise 3: what a downstream task holds is checked when `lmpt` starts, not after training. A
classification task of one class, a data.seq_len too short to fine-tune on and a choice longer than
model.max_seq_len each stop the launch in one line, exit 2, before any step (no run directory is left); the token
check runs once the run's tokenizer exists. lmpt-finetune and lmpt-eval refuse the same cases by the same functions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf
from runner import TINY_RUN, run_lmpt

from lmpt.config.schema import DownstreamConfig, ModelConfig
from lmpt.downstream.finetune import finetune
from lmpt.downstream.kinds.pairs import MinimalPairs
from lmpt.downstream.labelled_files import TaskData
from lmpt.downstream.options import FinetuneOptions
from lmpt.downstream.run_tasks import check_downstream_fits
from lmpt.downstream.task import Scoring, read_task
from lmpt.downstream.zero_shot_files import MinimalPair
from lmpt.errors import LmptError
from lmpt.model import build_model
from lmpt.objectives.registry import build_objective, objective_class
from lmpt.rundir.trained import Trained

TINY = [
    *TINY_RUN,
    "trainer.max_steps=3",
]
LONG_CHOICE = " ".join(["thou art a villain"] * 60)  # about 300 tokens or more: far past max_seq_len=64


def _jsonl(path: Path, records: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _classification(folder: Path, classes: int) -> Path:
    for split, n in (("train", 24), ("dev", 8)):
        _jsonl(folder / f"{split}.jsonl", [{"text": f"to be or not to be {i}", "label": i % classes} for i in range(n)])
    return folder


def _refused_before_training(tmp_path: Path, *overrides: str) -> str:
    """lmpt's one stderr line for OVERRIDES, asserting exit 2 and that no step ran: no run directory is left (so no
    checkpoint and no metrics.jsonl)."""
    run = tmp_path / "run"
    done = run_lmpt(*TINY, f"hydra.run.dir={run}", *overrides, cwd=tmp_path)
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.startswith("lmpt: error: ") and done.stderr.count("\n") == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert not (run / "checkpoints").exists() and not (run / "metrics.jsonl").exists()
    assert not run.exists()
    return done.stderr


def test_a_classification_task_of_one_class_stops_the_launch_before_training(tmp_path: Path) -> None:
    task = _classification(tmp_path / "verdict", classes=1)
    err = _refused_before_training(tmp_path, f"downstream.classification_tasks=[{task}]")
    assert "downstream.classification_tasks[0] (verdict)" in err
    assert "has only one class ('0' in field 'label')" in err


def test_a_data_seq_len_too_short_to_fine_tune_on_stops_the_launch_before_training(tmp_path: Path) -> None:
    task = _classification(tmp_path / "verdict", classes=2)
    err = _refused_before_training(tmp_path, "data.seq_len=4", f"downstream.classification_tasks=[{task}]")
    assert "downstream.classification_tasks[0] (verdict)" in err
    assert "seq_len=4 (the run's data.seq_len) must be in [8, " in err


def test_a_choice_longer_than_max_seq_len_stops_the_launch_before_training(tmp_path: Path) -> None:
    task = _jsonl(
        tmp_path / "long.jsonl",
        [
            {"context": "To be, or not", "choices": ["to be", "to sleep"], "label": 0},
            {"context": "Wherefore art thou", "choices": ["Romeo", LONG_CHOICE], "label": 0},
        ],
    )
    err = _refused_before_training(tmp_path, "model.max_seq_len=64", f"downstream.choice_tasks=[{task}]")
    assert f"downstream.choice_tasks[0]: {task}:2: a choice of " in err
    assert "does not fit the model's max_seq_len=64" in err


def _trained(shakespeare, objective: str, arch: str, seq_len: int = 64) -> Trained:
    torch.manual_seed(0)
    cfg = ModelConfig(name="tiny", d_model=32, n_layers=1, n_heads=2, ffn_dim=64, max_seq_len=64)
    model = build_model(cfg, arch, shakespeare.tokenizer.vocab_size, shakespeare.tokenizer.special.pad).eval()
    config = OmegaConf.create({"data": {"seq_len": seq_len}, "trainer": {"seed": 0}})
    return Trained(model, shakespeare.tokenizer, config, arch, objective, Path("unused"))


def _message(work) -> str:
    with pytest.raises(LmptError) as refusal:
        work()
    return str(refusal.value)


@pytest.mark.parametrize(("objective", "arch"), [("clm", "decoder"), ("span", "encoder-decoder")])
def test_lmpt_eval_refuses_the_long_choice_as_the_start_up_check_does(shakespeare, tmp_path, objective, arch) -> None:
    task = _jsonl(
        tmp_path / "long.jsonl", [{"context": "Wherefore art thou", "choices": ["Romeo", LONG_CHOICE], "label": 0}]
    )
    trained = _trained(shakespeare, objective, arch)
    at_eval = _message(lambda: read_task(str(task), how=Scoring(batch_size=8, hidden=True)).evaluate(trained))
    assert at_eval.startswith(f"{task}:1: a choice of ") and at_eval.endswith("max_seq_len=64: shorten it")
    settings = OmegaConf.structured(objective_class(objective).config_class)
    run_objective = build_objective(settings, shakespeare.tokenizer, 64, arch)
    downstream = DownstreamConfig(choice_tasks=[str(task)])
    at_start = _message(lambda: check_downstream_fits(downstream, 64, shakespeare.tokenizer, run_objective))
    assert at_start == f"downstream.choice_tasks[0]: {at_eval}"  # one check, the same words
    pair = MinimalPairs(name="long", items=[MinimalPair("Romeo speaks.", LONG_CHOICE)], how=Scoring(hidden=True))
    assert "does not fit the model's max_seq_len=64" in _message(lambda: pair.evaluate(trained))


def test_lmpt_finetune_refuses_one_class_and_a_short_seq_len_before_any_training(shakespeare, tmp_path) -> None:
    one = _classification(tmp_path / "one", classes=1)
    two = _classification(tmp_path / "two", classes=2)

    def options(folder: Path, **kw) -> FinetuneOptions:
        return FinetuneOptions(TaskData(str(folder / "train.jsonl"), str(folder / "dev.jsonl")), lr=1e-3, **kw)

    trained = _trained(shakespeare, "clm", "decoder")
    assert "has only one class" in _message(lambda: finetune(trained, options(one)))
    assert "seq_len=4 must be in [8, 64]" in _message(lambda: finetune(trained, options(two, seq_len=4)))
    short_run = _trained(shakespeare, "clm", "decoder", seq_len=4)  # its data.seq_len, when seq_len= is not given
    refusal = _message(lambda: finetune(short_run, options(two)))
    assert "seq_len=4 (the run's data.seq_len) must be in [8, 64]" in refusal


def test_a_searched_fine_tuning_of_a_task_too_small_to_search_stops_the_launch_before_training(tmp_path: Path) -> None:
    task = _classification(tmp_path / "verdict", classes=2)  # 24 training examples: a search needs 100 left
    err = _refused_before_training(tmp_path, "downstream.lr=search", f"downstream.classification_tasks=[{task}]")
    assert "downstream.classification_tasks[0] (verdict)" in err and "100" in err


@pytest.mark.parametrize("lr", ["sometimes", "0", "-1e-3", "inf"])
def test_a_bad_downstream_lr_stops_the_launch(tmp_path: Path, lr: str) -> None:
    err = _refused_before_training(tmp_path, f"downstream.lr={lr}")
    assert err.startswith("lmpt: error: downstream.lr=")
    assert "is invalid: it must be fixed, search or a positive finite number" in err


def test_downstream_lr_search_searches_the_in_run_fine_tuning_and_its_control(tmp_path: Path) -> None:
    folder = tmp_path / "topic"
    words = (["king", "crown", "throne", "court"], ["sea", "ship", "storm", "shore"])
    for split, n in (("train", 160), ("dev", 40)):
        _jsonl(
            folder / f"{split}.jsonl",
            [
                {"text": f"the {words[i % 2][i % 4]} and the {words[i % 2][(i + 1) % 4]} {i}", "label": i % 2}
                for i in range(n)
            ],
        )
    run = tmp_path / "run"
    done = run_lmpt(
        *TINY,
        f"hydra.run.dir={run}",
        "downstream.lr=search",
        "downstream.seeds=1",
        "downstream.epochs=1",
        f"downstream.classification_tasks=[{folder}]",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads((run / "downstream" / "topic.json").read_text())
    assert record["search"]["candidates"] and record["scratch"]["search"]["candidates"], sorted(record)
