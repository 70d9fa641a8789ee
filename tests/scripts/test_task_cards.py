"""scripts/task_cards.py: the table goes between its markers and nowhere else, and on a tiny run and task the script
scores the untrained control end to end, the control lmpt-finetune's control=scratch fine-tunes, bit for bit."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from runner import lmpt_env

from lmpt.downstream.finetune import finetune
from lmpt.downstream.kinds.classification import ClassificationResult
from lmpt.downstream.labelled_files import TaskData
from lmpt.downstream.options import FinetuneOptions
from lmpt.rundir.trained import load_trained

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
import task_cards  # noqa: E402


def fake_record() -> dict:
    choice = {
        "n": 874,
        "chance": 0.25,
        "accuracy": 0.25,
        "accuracy_low": 0.22,
        "accuracy_high": 0.28,
        "accuracy_norm": 0.24,
        "accuracy_norm_low": 0.21,
        "accuracy_norm_high": 0.27,
    }
    fine = {
        "mode": "probe",
        "seeds": 3,
        "dev_examples": 402,
        "test_examples": 368,
        "accuracy_mean": 0.5655,
        "accuracy_std": 0.016,
        "test_accuracy_mean": 0.5652,
        "test_accuracy_std": 0.017,
        "lr": 0.003,
        "pooling": "last",
    }
    return {
        "command": "python scripts/task_cards.py",
        "date": "2026-11-25",
        "commit": "abc1234",
        "finetune": [],
        "cut": "blimp was cut.",
        "machine": "2 CPU cores",
        "wall_min": 3.0,
        "architectures": ["decoder"],
        "runs": {"decoder": {"objective": "clm", "model": "tiny", "init_seed": 1337}},
        "tasks": {
            "shakespeare-cloze": {"kind": "zero-shot"},
            "shakespeare-order": {
                "kind": "classification",
                "dev_majority": 0.5,
                "test_majority": 0.5,
                "bag_of_words": {"accuracy": 0.61, "test_accuracy": 0.6},
            },
        },
        "results": {"decoder": {"shakespeare-cloze": choice, "shakespeare-order": fine}},
        "seconds": {"decoder": {"shakespeare-cloze": 43.1, "shakespeare-order": 89.7}},
    }


def test_the_table_replaces_only_what_lies_between_its_markers(tmp_path: Path) -> None:
    section = task_cards.card_section(fake_record())
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    assert rows[2:] == [
        "| `shakespeare-cloze` | accuracy (874 questions) | 0.250 [0.220, 0.280] | 0.25 (chance) |  |",
        "|  | accuracy_norm (per byte) | 0.240 [0.210, 0.270] | 0.25 (chance) |  |",
        "| `shakespeare-order` | dev accuracy (402), probe, 3 seeds | 0.566 ± 0.016 | 0.500 (majority) | 0.610 |",
        "|  | test accuracy (368) | 0.565 ± 0.017 | 0.500 (majority) | 0.600 |",
    ]
    assert "blimp was cut." in section and "`shakespeare-order` decoder lr 0.003 last" in section
    assert "Seconds each scoring took (decoder): `shakespeare-cloze` 43; `shakespeare-order` 90." in section
    assert max(len(line) for line in section.splitlines() if not line.startswith("|")) <= 120
    doc = tmp_path / "tasks.md"
    doc.write_text("# Tasks\n\nintro\n")
    task_cards.write_section(doc, "old table")
    block = f"{task_cards.START}\nold table\n{task_cards.END}\n"
    assert doc.read_text() == f"# Tasks\n\nintro\n\n{task_cards.HEADING}\n\n{block}"
    doc.write_text(doc.read_text() + "\n## Licence\n\nMIT\n")
    task_cards.write_section(doc, section)
    text = doc.read_text()
    assert text.startswith("# Tasks\n\nintro\n\n") and text.endswith(f"{task_cards.END}\n\n## Licence\n\nMIT\n")
    assert "old table" not in text and text.count(task_cards.START) == text.count(task_cards.HEADING) == 1
    (tmp_path / "cards.json").write_text(json.dumps(fake_record()))
    task_cards.main(["--from-json", "--out", str(tmp_path / "cards"), "--doc", str(doc)])
    assert doc.read_text() == text  # the same figures write the same file, and --from-json writes them from the JSON
    task_cards.main(["--from-json", "--out", str(tmp_path / "cards"), "--doc", str(doc), "--cut", "Nothing was cut."])
    assert "Nothing was cut." in doc.read_text() and "blimp was cut." not in doc.read_text()
    assert json.loads((tmp_path / "cards.json").read_text())["cut"] == "Nothing was cut."


def test_a_bad_architecture_or_task_is_one_line_before_any_work(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    for argv, message in (
        (["--architectures", "rnn"], "--architectures rnn: use decoder, encoder, encoder-decoder"),
        (["--tasks", "no-such-task"], "--tasks no-such-task: task=bundled:no-such-task is not"),
        (["--from-json"], "--from-json: " + str(tmp_path / "out.json") + " does not exist"),
    ):
        with pytest.raises(SystemExit) as exit_info:
            task_cards.main([*argv, "--out", str(tmp_path / "out")])
        err = capsys.readouterr().err
        assert exit_info.value.code == 2 and err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "out").exists()


def tiny_task(folder: Path) -> Path:
    """20 / 12 / 8 examples of shakespeare-order, in its files' format."""
    folder.mkdir()
    shipped = REPO / "lmpt" / "tasks" / "shakespeare-order"
    for split, n in (("train", 20), ("dev", 12), ("test", 8)):
        lines = (shipped / f"{split}.jsonl").read_text().splitlines()
        (folder / f"{split}.jsonl").write_text("\n".join(lines[:n]) + "\n")
    return folder


def test_the_script_scores_the_untrained_control_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in lmpt_env().items():
        monkeypatch.setenv(key, value)
    task = tiny_task(tmp_path / "tiny-order")
    run = [
        "tokenizer.vocab_size=1024",
        "model.n_layers=1",
        "data.seq_len=32",
        "trainer.batch_size=4",
        "trainer.eval_batches=1",
    ]
    doc = tmp_path / "tasks.md"
    task_cards.main(
        [
            "--architectures",
            "decoder",
            "--tasks",
            str(task),
            "--out",
            str(tmp_path / "cards"),
            "--doc",
            str(doc),
            "--run",
            *run,
            "--finetune",
            "seeds=1",
            "lr=null",
        ]
    )
    record = json.loads((tmp_path / "cards.json").read_text())
    result = record["results"]["decoder"]["tiny-order"]
    assert record["runs"]["decoder"]["objective"] == "clm" and result["mode"] == "probe"
    assert record["tasks"]["tiny-order"]["dev_majority"] == pytest.approx(result["majority_accuracy"])
    run_dir = tmp_path / "cards" / "decoder"
    assert not (run_dir / "best").exists() and not (run_dir / "checkpoints").exists()
    # lmpt-finetune's own control of the run is the model the script scored: the same figures, seed by seed
    options = FinetuneOptions(
        data=TaskData(**{s: str(task / f"{s}.jsonl") for s in ("train", "dev", "test")}),
        task="tiny-order",
        seeds=1,
        lr=None,
        json=True,
    )
    with_control = ClassificationResult.of(finetune(load_trained(run_dir), options)).to_json()
    assert with_control["scratch"]["per_seed"] == result["per_seed"]
    assert with_control["bag_of_words"] == record["tasks"]["tiny-order"]["bag_of_words"]
    text = doc.read_text()
    assert f"{task_cards.HEADING}\n\n{task_cards.START}\n" in text and "| `tiny-order` | dev accuracy (12)" in text
