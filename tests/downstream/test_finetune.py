"""lmpt-finetune on tiny runs of every architecture, pre-trained once per module by the real CLI: the JSON figures,
the record, full vs probe, bit-for-bit seeds, and one-line refusals of bad input that write nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from finetune_commands import refused
from runner import run_lmpt

from lmpt.downstream.finetune import finetune
from lmpt.downstream.finetune_cli import finetune_command
from lmpt.downstream.labelled_files import TaskData
from lmpt.downstream.options import FinetuneOptions
from lmpt.rundir.trained import load_trained

REPO = Path(__file__).resolve().parents[2]
TINY = [
    "tokenizer.vocab_size=1024",
    "data.seq_len=64",
    "trainer.batch_size=8",
    "trainer.max_steps=4",
    "trainer.sample_tokens=0",
    "trainer.progress=plain",
    "trainer.eval_batches=1",
    "model.n_layers=2",
]
OBJECTIVES = {"decoder": "clm", "encoder": "mlm", "encoder-decoder": "span"}
FIXED = ["lr=null", "control=none"]  # the fixed recipe, no control: these tasks are too small to search
FAST = ["seeds=2", "max_steps=3", "batch_size=8", "seq_len=32", *FIXED]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny pre-trained run per architecture (clm decoder, mlm encoder, span encoder-decoder)."""
    root = tmp_path_factory.mktemp("pretrained")  # LMPT_CACHE_DIR from tests/conftest.py: one tokenizer for all
    done = {}
    for arch, objective in OBJECTIVES.items():
        job = run_lmpt(*TINY, f"objective={objective}", f"hydra.run.dir={root / arch}", cwd=root)
        assert job.returncode == 0, job.stderr[-2000:]
        done[arch] = root / arch
    return done


@pytest.fixture(scope="module")
def task(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A real two-class task from the bundled corpora: is a line Shakespeare or Wikipedia? (train, dev, test)."""
    corpora = REPO / "lmpt" / "corpora"
    lines = lambda name, skip: [
        line.strip()
        for line in (corpora / name).read_text(encoding="utf-8").splitlines()
        if len(line.strip()) > 30 and not line.strip().startswith(skip)
    ]
    shakespeare, wiki = lines("tinyshakespeare.txt", "#"), lines("wikitext-2-valid.txt", "=")
    root, files = tmp_path_factory.mktemp("task"), {}
    for split, (start, n) in {"train": (0, 16), "dev": (100, 8), "test": (200, 8)}.items():
        rows = [{"text": t, "label": "shakespeare"} for t in shakespeare[start : start + n]]
        rows += [{"text": t[:160], "label": "wikipedia"} for t in wiki[start : start + n]]
        rows = rows[::2] + rows[1::2]  # mixed, deterministically
        files[split] = str(root / f"{split}.jsonl")
        Path(files[split]).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return files


def _json(argv: list[str], capsys: pytest.CaptureFixture) -> dict:
    finetune_command([*argv, "json=true"])
    out = capsys.readouterr().out
    assert out.count("\n") == 1  # one JSON object, nothing else on stdout
    return json.loads(out)


def _data(task: dict[str, str], test: bool = True) -> list[str]:
    return [f"data.train={task['train']}", f"data.dev={task['dev']}", *([f"data.test={task['test']}"] if test else [])]


@pytest.mark.parametrize("arch", list(OBJECTIVES))
def test_every_architecture_fine_tunes_and_keeps_a_record(runs, task, arch: str, capsys) -> None:
    out = _json([str(runs[arch]), *_data(task), *FAST, "mode=full", "task=source"], capsys)
    assert (out["arch"], out["objective"], out["mode"], out["seeds"]) == (arch, OBJECTIVES[arch], "full", 2)
    assert out["pooling"] == {"decoder": "last", "encoder": "mean", "encoder-decoder": "encoder_mean"}[arch]
    assert out["classes"] == ["shakespeare", "wikipedia"] and out["majority_accuracy"] == 0.5
    assert (out["train_examples"], out["dev_examples"], out["test_examples"], out["steps"]) == (32, 16, 16, 3)
    assert [run["seed"] for run in out["per_seed"]] == [0, 1]
    for key in ("accuracy", "macro_f1", "mcc", "test_accuracy", "test_macro_f1", "test_mcc"):
        values = [run[key] for run in out["per_seed"]]
        assert out[f"{key}_mean"] == pytest.approx(sum(values) / 2)
        assert out[f"{key}_std"] == pytest.approx(abs(values[0] - values[1]) / 2**0.5)  # sample std, ddof=1
        assert all(-1 <= v <= 1 for v in values) and (key.endswith("mcc") or all(v >= 0 for v in values))
    assert json.loads(Path(out["record"]).read_text()) == out  # a hand run's record, beside the run's own


def test_pair_task_and_other_poolings(runs, task, tmp_path: Path, capsys) -> None:
    pairs = tmp_path / "pairs.jsonl"
    rows = [json.loads(line) for line in Path(task["train"]).read_text().splitlines()]
    pairs.write_text("".join(json.dumps({**r, "second": r["text"][::-1]}) + "\n" for r in rows))
    base = [f"data.train={pairs}", f"data.dev={pairs}", "data.pair_field=second", *FAST, "seeds=1"]
    for arch, pooling in (("encoder", "first"), ("encoder-decoder", "decoder_first")):
        out = _json([str(runs[arch]), *base, f"pooling={pooling}", f"task=pairs-{pooling}"], capsys)
        assert out["pooling"] == pooling and out["accuracy_std"] is None and "test_accuracy_mean" not in out


def test_probe_leaves_the_body_unchanged_and_full_leaves_the_callers_model(runs, task) -> None:
    trained = load_trained(runs["encoder"])
    before = {k: v.clone() for k, v in trained.model.state_dict().items()}
    data = TaskData(train=task["train"], dev=task["dev"])
    fixed = {"lr": None, "control": "none", "batch_size": 8, "json": True}  # lr=None: the mode's default
    probe = finetune(trained, FinetuneOptions(data=data, mode="probe", seeds=2, max_steps=4, **fixed))
    full = finetune(trained, FinetuneOptions(data=data, mode="full", seeds=1, max_steps=2, **fixed))
    after = trained.model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert probe.options.mode == "probe" and probe.pretrained.lr == 1e-2 and full.pretrained.lr == 1e-4
    seeds = probe.pretrained.runs.per_seed
    assert seeds[0]["train_loss"] != seeds[1]["train_loss"]  # the seed draws the head


def test_one_seed_is_bit_for_bit_on_the_cpu(runs, task, capsys) -> None:
    argv = [str(runs["decoder"]), *_data(task), "seeds=1", "max_steps=4", "batch_size=8", "task=again", *FIXED]
    first, second = _json(argv, capsys), _json(argv, capsys)
    first.pop("examples_per_s"), second.pop("examples_per_s")
    first.pop("record"), second.pop("record")  # each hand run keeps its own record file: the figures must agree
    assert first == second


BAD_FILES = {
    "missing label field": ('{"text": "a b c", "score": 1}\n', "has no field 'label'"),
    "one class only": ('{"text": "a b c", "label": 1}\n{"text": "d e", "label": 1}\n', "has only one class"),
    "text not text": ('{"text": 12, "label": 0}\n{"text": "d e", "label": 1}\n', "holds int 12, not text"),
    "text a list": ('{"text": ["a"], "label": 0}\n{"text": "d e", "label": 1}\n', "holds list"),
    "empty split": ("", "holds no examples"),
}


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_a_bad_train_file_is_one_line_and_writes_nothing(runs, task, tmp_path, case, capsys, monkeypatch) -> None:
    text, message = BAD_FILES[case]
    (tmp_path / "bad.jsonl").write_text(text)
    record = runs["decoder"] / "downstream" / "kept.json"
    record.parent.mkdir(exist_ok=True)
    record.write_text('{"kept": true}\n')
    argv = [str(runs["decoder"]), f"data.train={tmp_path / 'bad.jsonl'}", f"data.dev={task['dev']}", "task=kept"]
    assert message in refused(argv, capsys, monkeypatch)
    assert record.read_text() == '{"kept": true}\n'


def test_unseen_dev_label_empty_dev_missing_file_and_bad_keys(runs, task, tmp_path, capsys, monkeypatch) -> None:
    run = runs["encoder"]
    (tmp_path / "dev.jsonl").write_text('{"text": "a b", "label": "poetry"}\n')
    (tmp_path / "empty.tsv").write_text("text\tlabel\n")
    cases = {
        f"data.dev={tmp_path / 'dev.jsonl'}": "label(s) 'poetry' never seen in training",
        f"data.dev={tmp_path / 'empty.tsv'}": "holds no examples",
        f"data.dev={tmp_path / 'nope.jsonl'}": "does not exist",
        "data.nope=1": "unknown key 'data.nope'",
        "pooling=last": "pooling=last does not fit a encoder",
        "mode=half": "mode=half is unknown",
    }
    for override, message in cases.items():
        argv = [str(run), *_data(task, test=False), override, "task=never"]
        assert message in refused(argv, capsys, monkeypatch), override
    assert "needs data.train=..., data.dev=..." in refused([str(run)], capsys, monkeypatch)
    assert not (run / "downstream" / "never.json").exists()
    assert not list((run / "downstream" / "hand").glob("never-*"))  # nor a hand record


def test_the_console_script_refuses_in_one_line_and_writes_nothing(runs, task, tmp_path) -> None:
    (tmp_path / "one.tsv").write_text("text\tlabel\na b c\tyes\nd e f\tyes\n")
    argv = [str(runs["encoder"]), f"data.train={tmp_path / 'one.tsv'}", f"data.dev={task['dev']}", "task=cli"]
    done = run_lmpt(*argv, cwd=tmp_path, command="lmpt-finetune")
    assert done.returncode == 2 and done.stdout == "" and done.stderr.count("\n") == 1
    assert "has only one class ('yes' in field 'label')" in done.stderr
    assert not (runs["encoder"] / "downstream" / "cli.json").exists()
    assert not list((runs["encoder"] / "downstream" / "hand").glob("cli-*"))  # nor a hand record


@pytest.mark.soak
@pytest.mark.parametrize("arch", list(OBJECTIVES))
def test_fine_tuning_beats_the_majority_class(runs, task, arch: str, capsys) -> None:
    out = _json([str(runs[arch]), *_data(task), "seeds=3", "epochs=8", "batch_size=8", "task=soak", *FIXED], capsys)
    assert out["accuracy_mean"] > out["majority_accuracy"] + 0.2, out
