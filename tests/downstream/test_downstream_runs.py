"""Downstream scoring on real runs: one small `lmpt -m objective=clm,mlm` sweep whose jobs score a cloze task
zero-shot and fine-tune a classification task when they end, then rank by it; lmpt-eval task= on its runs; and
lm-evaluation-harness scoring the exported decoder exactly as lmpt does, by default."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from runner import TINY_RUN, lmpt_env, run_lmpt

from lmpt.downstream.bundled import tasks_dir
from lmpt.downstream.eval_cli import evaluate
from lmpt.downstream.likelihood import choice_scores, pair_scores
from lmpt.downstream.zero_shot_files import read_choice_task, read_pairs
from lmpt.hf.export import export
from lmpt.inference.progress import WorkBar
from lmpt.rundir.trained import load_trained

TINY = [
    *TINY_RUN,
    "trainer.max_steps=4",
]
OFFLINE = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def _head(source: Path, target: Path, lines: int) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("".join(source.read_text().splitlines(keepends=True)[:lines]))
    return target


@pytest.fixture(scope="module")
def tasks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Small slices of the shipped tasks: cloze.jsonl and order/{train,dev}.jsonl."""
    root = tmp_path_factory.mktemp("tasks")
    _head(tasks_dir() / "shakespeare-cloze.jsonl", root / "cloze.jsonl", 16)
    _head(tasks_dir() / "shakespeare-order" / "train.jsonl", root / "order" / "train.jsonl", 48)
    _head(tasks_dir() / "shakespeare-order" / "dev.jsonl", root / "order" / "dev.jsonl", 24)
    return root


@pytest.fixture(scope="module")
def sweep(tasks: Path) -> tuple[Path, str]:
    """(sweep directory, its console output) of clm and mlm jobs that score both tasks when they end."""
    sweep_dir = tasks.parent / "sweep"
    command = [
        "-m",
        "objective=clm,mlm",
        *TINY,
        f"hydra.sweep.dir={sweep_dir}",
        f"downstream.choice_tasks=[{tasks / 'cloze.jsonl'}]",
        f"downstream.classification_tasks=[{tasks / 'order'}]",
        "downstream.seeds=2",
        "downstream.epochs=1",
    ]
    done = run_lmpt(*command, cwd=tasks.parent)
    assert done.returncode == 0, done.stderr[-3000:]
    return sweep_dir, done.stdout


def test_a_sweep_across_objectives_ends_ranked_by_a_downstream_figure(sweep: tuple[Path, str]) -> None:
    sweep_dir, out = sweep
    assert "ranked by downstream/cloze/accuracy (higher is better)" in out  # the zero-shot task, as a study ranks
    rows = list(csv.DictReader((sweep_dir / "summary.csv").open()))
    assert sorted(r["objective"] for r in rows) == ["clm", "mlm"]
    ranked = [float(r["cloze/accuracy"]) for r in rows]
    assert ranked == sorted(ranked, reverse=True)
    for job in ("0", "1"):
        last = json.loads((sweep_dir / job / "metrics.jsonl").read_text().splitlines()[-1])
        assert last["step"] == 4 and last["downstream/cloze/chance"] == 0.25
        assert 0 <= last["downstream/cloze/accuracy"] <= 1 and 0 <= last["downstream/order/accuracy_mean"] <= 1
        record = json.loads((sweep_dir / job / "downstream" / "order.json").read_text())
        assert record["accuracy_mean"] == last["downstream/order/accuracy_mean"] and len(record["per_seed"]) == 2
        assert (sweep_dir / job / "downstream" / "cloze.json").is_file()


def test_lmpt_eval_task_scores_what_the_run_logged(sweep: tuple[Path, str], tasks: Path, capsys) -> None:
    for job in ("0", "1"):
        evaluate([str(sweep[0] / job), f"task={tasks / 'cloze.jsonl'}", "json=true"])
        result = json.loads(capsys.readouterr().out)
        logged = json.loads((sweep[0] / job / "metrics.jsonl").read_text().splitlines()[-1])
        assert result["accuracy"] == logged["downstream/cloze/accuracy"]
        assert result["accuracy_norm"] == logged["downstream/cloze/accuracy_norm"]
        assert (result["n"], result["chance"]) == (16, 0.25)
    assert "pseudo-log-likelihood" in result["method"] and result["arch"] == "encoder"


def test_a_bad_downstream_task_is_refused_before_training(tasks: Path) -> None:
    bad = tasks / "one-choice.jsonl"
    bad.write_text(json.dumps({"context": "a", "choices": ["b"], "label": 0}) + "\n")
    run_dir = tasks.parent / "refused"
    done = run_lmpt(*TINY, f"downstream.choice_tasks=[{bad}]", f"hydra.run.dir={run_dir}", cwd=tasks.parent)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert lines[0].startswith("lmpt: error: downstream.choice_tasks[0]:") and "choices has 1 entry" in lines[0]
    assert not run_dir.exists()


def _lm_eval_scores(hf: Path, yaml_dir: Path, out: Path, model_args: str = "") -> dict[str, dict]:
    """lm_eval --model hf on the local task YAMLs (dataset_path: json), nothing downloaded: per task, per doc_id,
    (the log-likelihood of every choice, acc, acc_norm) from its --log_samples output."""
    command = [
        sys.executable,
        "-m",
        "lm_eval",
        "--model",
        "hf",
        "--model_args",
        f"pretrained={hf},dtype=float32{model_args}",
        "--tasks",
        "lmpt_cloze,lmpt_pairs",
        "--include_path",
        str(yaml_dir),
        "--device",
        "cpu",
        "--batch_size",
        "8",
        "--output_path",
        str(out),
        "--log_samples",
    ]
    env = lmpt_env(**OFFLINE, HF_HOME=str(out.parent / "hf-home"))
    done = subprocess.run(command, cwd=out.parent, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    scores: dict[str, dict] = {}
    for task in ("cloze", "pairs"):
        (samples,) = out.rglob(f"samples_lmpt_{task}_*.jsonl")
        for line in samples.read_text().splitlines():
            sample = json.loads(line)
            loglik = [float(r[0][0]) for r in sample["resps"]]
            scores.setdefault(task, {})[sample["doc_id"]] = (loglik, sample["acc"], sample.get("acc_norm"))
    return scores


def test_lm_evaluation_harness_scores_the_exported_decoder_as_lmpt_does(sweep, tasks: Path, tmp_path: Path) -> None:
    """lm_eval --model hf with its default arguments on the default export: the same log-likelihood of every choice
    as lmpt-eval's (within 1e-4), on the cloze (a context: both read it after eos, lm_eval because the exported
    tokenizer puts its bos, eos, before every text) and on the first 50 blimp-fast minimal pairs as lm_eval's blimp
    tasks frame them (an empty context, which lm_eval starts from the tokenizer's bos: eos); so the same acc and
    acc_norm (the choices are ASCII: characters = bytes). The export with add_bos_token=false shows the check can
    fail: lm_eval then reads the cloze's contexts without eos and its scores move off lmpt's."""
    run = sweep[0] / "0"
    export([str(run), str(tmp_path / "hf")])
    export([str(run), str(tmp_path / "hf-nobos"), "add_bos_token=false"])
    (tmp_path / "yaml").mkdir()
    (tmp_path / "yaml" / "cloze.yaml").write_text(
        f"task: lmpt_cloze\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {tasks / 'cloze.jsonl'}\n"
        "test_split: test\noutput_type: multiple_choice\ndoc_to_text: '{{context}}'\ndoc_to_choice: choices\n"
        "doc_to_target: label\nmetric_list:\n  - metric: acc\n  - metric: acc_norm\n"
    )
    pairs = _head(tasks_dir() / "blimp-fast.jsonl", tmp_path / "pairs.jsonl", 50)
    (tmp_path / "yaml" / "pairs.yaml").write_text(  # lm_eval's blimp template, over a local file
        f"task: lmpt_pairs\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {pairs}\n"
        "test_split: test\noutput_type: multiple_choice\ndoc_to_text: ''\ndoc_to_target: 0\n"
        "doc_to_choice: '{{[sentence_good, sentence_bad]}}'\nmetric_list:\n  - metric: acc\n"
    )
    trained = load_trained(run)
    questions = read_choice_task(str(tasks / "cloze.jsonl"))
    with torch.no_grad(), WorkBar("", hidden=True) as bar:
        ours = choice_scores(trained, questions, 8, torch.device("cpu"), bar)
        ours_pairs = list(zip(*pair_scores(trained, read_pairs(str(pairs)), 8, torch.device("cpu"), bar), strict=True))
    theirs = _lm_eval_scores(tmp_path / "hf", tmp_path / "yaml", tmp_path / "out")
    assert sorted(theirs["cloze"]) == list(range(len(questions)))
    for i, (question, scores) in enumerate(zip(questions, ours, strict=True)):
        loglik, acc, acc_norm = theirs["cloze"][i]
        assert scores == pytest.approx(loglik, abs=1e-4), i
        per_byte = [s / len(c) for s, c in zip(scores, question.choices, strict=True)]
        assert acc == float(scores.index(max(scores)) == question.label)
        assert acc_norm == float(per_byte.index(max(per_byte)) == question.label)
    assert sorted(theirs["pairs"]) == list(range(50))
    for i, scores in enumerate(ours_pairs):  # (good, bad) as lmpt-eval task=pairs.jsonl scores them
        loglik, acc, _ = theirs["pairs"][i]
        assert list(scores) == pytest.approx(loglik, abs=1e-4), i
        assert acc == float(scores[0] > scores[1])
    without = _lm_eval_scores(tmp_path / "hf-nobos", tmp_path / "yaml", tmp_path / "out-nobos")
    off = max(abs(a - b) for i, scores in enumerate(ours) for a, b in zip(scores, without["cloze"][i][0], strict=True))
    assert off > 1e-3  # a context read without eos scores off by 10x the tolerance: the check tells the framings apart
    for i, scores in enumerate(ours_pairs):  # an empty context starts from bos either way
        assert list(scores) == pytest.approx(without["pairs"][i][0], abs=1e-4), i
