"""lmpt-finetune and the downstream group agree (issue 32): one default mode, defined once (downstream.mode's), and
the table's title says which mode ran and what it trains; `task=bundled:NAME` fine-tunes on a task lmpt ships, read
as the downstream group reads it. A bundled name lmpt does not ship, or one given beside data.* files, is one line,
exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from composed import composed
from finetune_commands import pretrained, refused

from lmpt.config.schema import DownstreamConfig
from lmpt.downstream import bundled
from lmpt.downstream.bundled import tasks_dir
from lmpt.downstream.finetune_cli import finetune_command
from lmpt.downstream.labelled_files import TaskData
from lmpt.downstream.options import MODE_MEANINGS, FinetuneOptions

TINY = [
    "tokenizer.vocab_size=1024",
    "data.seq_len=64",
    "trainer.batch_size=8",
    "trainer.max_steps=2",
    "trainer.sample_tokens=0",
    "trainer.progress=plain",
    "trainer.eval_batches=1",
    "model.n_layers=1",
    "objective=clm",
]
FAST = ["seeds=1", "max_steps=2", "batch_size=32", "seq_len=32", "lr=null", "control=none"]
ORDER = tasks_dir() / "shakespeare-order"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny clm decoder, pre-trained once by the real CLI."""
    return pretrained(tmp_path_factory, TINY)


@pytest.fixture
def shipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """lmpt's tasks folder in small: shakespeare-order's first lines of each split, where bundled: names look."""
    folder = tmp_path / "tasks" / "shakespeare-order"
    folder.mkdir(parents=True)
    for split, n in (("train", 64), ("dev", 24), ("test", 16)):
        lines = (ORDER / f"{split}.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
        (folder / f"{split}.jsonl").write_text("".join(lines[:n]), encoding="utf-8")
    monkeypatch.setattr(bundled, "tasks_dir", lambda: tmp_path / "tasks")
    return folder


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_the_default_mode_is_the_downstream_groups() -> None:
    assert FinetuneOptions(TaskData()).mode == DownstreamConfig.mode == composed().downstream.mode == "probe"
    assert composed("downstream=shakespeare").downstream.mode == FinetuneOptions(TaskData()).mode


def test_one_recipe_schema_serves_the_downstream_section_and_lmpt_finetune() -> None:
    """Issue 52: the fine-tuning recipe is one schema (FinetuneRecipe), not two copied field by field: each of its
    keys is declared once, and a run's section hands it to fine-tuning whole."""
    import dataclasses

    from lmpt.config.schema import FinetuneRecipe
    from lmpt.downstream.kinds.classification import Classification
    from lmpt.downstream.task import Scoring

    shared = [f.name for f in dataclasses.fields(FinetuneRecipe)]
    assert shared == ["mode", "seeds", "epochs", "max_train_examples", "batch_size", "control"]
    for schema in (DownstreamConfig, FinetuneOptions):
        assert issubclass(schema, FinetuneRecipe) and not set(shared) & set(vars(schema).get("__annotations__", {}))
    section = DownstreamConfig(mode="full", seeds=5, epochs=2, max_train_examples=100, batch_size=8, control="none")
    options = Classification.read("bundled:clinc-domains", "k", Scoring.of(section)).options
    assert [getattr(options, k) for k in shared] == ["full", 5, 2, 100, 8, "none"]


def _bundled_is_scored(run: Path, folder: Path, capsys: pytest.CaptureFixture) -> None:
    """lmpt-finetune RUN task=bundled:shakespeare-order reads `folder`'s splits, scores them in the default mode and
    keeps the record under the task's name."""
    finetune_command([str(run), "task=bundled:shakespeare-order", *FAST, "json=true"])
    shown = capsys.readouterr()
    out = json.loads(shown.out)
    assert out["task"] == "shakespeare-order" and out["mode"] == "probe" and out["classes"] == ["0", "1"]
    expected = (_lines(folder / "train.jsonl"), _lines(folder / "dev.jsonl"), _lines(folder / "test.jsonl"))
    assert (out["train_examples"], out["dev_examples"], out["test_examples"]) == expected
    assert 0 <= out["accuracy_mean"] <= 1 and 0 <= out["test_accuracy_mean"] <= 1
    record = json.loads(Path(out["record"]).read_text())  # a hand run's record, beside the run's own
    assert Path(out["record"]).parent == run / "downstream" / "hand"
    assert record["accuracy_mean"] == out["accuracy_mean"] and record["train_examples"] == expected[0]
    assert shown.out.count("\n") == 1 and shown.err == ""  # json=true: the JSON alone


def test_a_bundled_task_is_fine_tuned_in_the_default_mode_named_and_recorded(run, shipped, capsys) -> None:
    _bundled_is_scored(run, shipped, capsys)


@pytest.mark.soak
def test_the_shipped_shakespeare_order_is_fine_tuned_whole(run, capsys) -> None:
    _bundled_is_scored(run, ORDER, capsys)


@pytest.mark.parametrize("mode", ["probe", "full"])
def test_the_table_says_the_mode_and_what_it_trains(run, shipped, mode: str, capsys) -> None:
    given = [f"mode={mode}"] if mode == "full" else []  # probe: the default
    finetune_command([str(run), "task=bundled:shakespeare-order", *FAST, *given])
    out = " ".join(capsys.readouterr().out.split())  # the title may wrap
    assert f"lmpt-finetune shakespeare-order: clm decoder, mode={mode} ({MODE_MEANINGS[mode]}), pooling last" in out


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (
            ["task=bundled:nope"],
            ["task=bundled:nope is not a classification task lmpt ships", "bundled:shakespeare-order"],
        ),
        (["task=bundled:shakespeare-order", "data.train=x.jsonl"], ["brings its own files: drop data.train"]),
        ([], ["needs data.train=..., data.dev=... (or task=bundled:NAME)"]),
        (["data.train=x.jsonl"], ["needs data.dev=... (or task=bundled:NAME)"]),
    ],
)
def test_a_bad_bundled_name_or_missing_files_is_one_line(run, argv, said, capsys, monkeypatch) -> None:
    err = refused([str(run), *argv], capsys, monkeypatch)
    assert all(part in err for part in said), err
    assert not (run / "downstream" / "nope.json").exists()
    assert not list((run / "downstream" / "hand").glob("nope-*"))  # nor a hand record
