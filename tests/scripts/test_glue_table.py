"""scripts/glue_table.py: the GLUE table comes from each run's newest GLUE record of the same tasks, cap and seeds,
ranked by the GLUE score beside the untrained control and the floor, with each task's official figures and gain, the
cost and the commands, written between the document's markers with the discussion around them kept. No machine path
reaches the document."""

from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture()
def script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    spec = importlib.util.spec_from_file_location("glue_table", REPO / "scripts" / "glue_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    doc = tmp_path / "docs" / "glue_table.md"
    doc.parent.mkdir()
    doc.write_text(f"# Title\n\nintro\n\n{module.START}\nold tables\n{module.END}\n\n## What it shows\n\nkept\n")
    monkeypatch.setattr(module, "DOC", doc)
    return module


def _record(run: Path, stamp: str, rte: float, scratch: float, cap: int = 100, seeds: int = 2) -> None:
    """A GLUE record of RTE and MRPC as lmpt-finetune task=glue writes one (the fields the table reads)."""
    models = {
        "pretrained": {
            "rte": {"figures": {"accuracy": rte}, "score": rte},
            "mrpc": {"figures": {"f1": 0.8, "accuracy": 0.6}, "score": 0.7},
        },
        "scratch": {
            "rte": {"figures": {"accuracy": scratch}, "score": scratch},
            "mrpc": {"figures": {"f1": 0.8, "accuracy": 0.6}, "score": 0.7},
        },
        "bag_of_words": {
            "rte": {"figures": {"accuracy": 0.47}, "score": 0.47},
            "mrpc": {"figures": {"f1": 0.82, "accuracy": 0.7}, "score": 0.76},
        },
    }
    gain = {"accuracy": {"gain": rte - scratch, "interval": [rte - scratch - 0.05, rte - scratch + 0.05]}}
    gain["accuracy"]["significant"] = abs(rte - scratch) > 0.05
    record = {
        "task": "glue",
        "tasks": ["MRPC", "RTE"],
        "wnli_in_score": False,
        "max_train_examples": cap,
        "seeds": seeds,
        "mode": "probe",
        "control": "scratch",
        "scores": {m: (tasks["rte"]["score"] + tasks["mrpc"]["score"]) / 2 for m, tasks in models.items()},
        "models": models,
        "results": {
            "mrpc": {"task": "MRPC", "train_examples": cap, "lr": 0.01, "majority_accuracy": 0.68, "gain": {}},
            "rte": {"task": "RTE", "train_examples": cap, "lr": 0.003, "majority_accuracy": 0.527, "gain": gain},
        },
        "record": str(run / "downstream" / "hand" / f"glue-{stamp}.json"),
    }
    hand = run / "downstream" / "hand"
    hand.mkdir(parents=True, exist_ok=True)
    (hand / f"glue-{stamp}.json").write_text(json.dumps(record))
    (run / "status.json").write_text(json.dumps({"wall_s": 400.0, "val_loss": 3.5}))


def _args(runs: Path, **over: object) -> argparse.Namespace:
    given = {"runs_dir": runs, "data": runs / "glue_data", "tasks": "rte,mrpc", "max_train_examples": 100, "seeds": 2}
    return argparse.Namespace(**{**given, **over})


def test_ranked_by_glue_score_between_the_markers(script, tmp_path: Path) -> None:
    runs = tmp_path / "machine" / "glue_runs"
    _record(runs / "clm", "20260101-000000", rte=0.60, scratch=0.50)
    _record(runs / "mlm", "20260101-000000", rte=0.50, scratch=0.52)
    (runs / script.WALL).write_text(json.dumps({"clm": {"glue_s": 600.0}, "mlm": {"glue_s": 300.0}}))
    script.write_doc(script.generated(_args(runs), ["mlm", "clm"]))
    text = script.DOC.read_text()
    assert text.startswith("# Title\n\nintro\n\n") and text.endswith("## What it shows\n\nkept\n")
    assert "old tables" not in text
    ranked = text.split("## Ranked by the GLUE score")[1].split("##")[0]
    assert ranked.index("| 1 | clm |") < ranked.index("| 2 | mlm |")
    assert "| 1 | clm | 3.5000 | 65.0 | 60.0 | +5.0 | 61.5 |" in ranked
    assert "F1 80.0 / acc 60.0" in text and "acc 47.0" in text  # official figures times 100, the floor once
    assert text.count("\n| bag-of-words floor |") == 1
    assert "| 10.0 [5.0, 15.0] * |" in text  # clm's RTE gain, significant
    assert "WNLI not counted" in text and "at most 100 training examples" in text
    assert "lmpt-finetune clm/best task=glue:rte,mrpc data.dir=glue_data max_train_examples=100 seeds=2" in text
    assert "hydra.run.dir=clm" in text and "In all 28m20s of wall time" in text  # 2 x 400 s + 600 s + 300 s
    assert str(tmp_path) not in text and "machine" not in text


def test_reads_the_newest_record_of_the_same_tasks_cap_and_seeds(script, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    _record(runs / "clm", "20260101-000000", rte=0.55, scratch=0.5)
    _record(runs / "clm", "20260102-000000", rte=0.58, scratch=0.5)
    _record(runs / "clm", "20260103-000000", rte=0.70, scratch=0.5, cap=500)  # another cap: not this table's
    _record(runs / "clm", "20260104-000000", rte=0.71, scratch=0.5, seeds=3)  # other seeds: not this table's
    assert script.glue_record(runs / "clm", _args(runs))["models"]["pretrained"]["rte"]["score"] == 0.58
    assert script.glue_record(runs / "clm", _args(runs, tasks="rte")) is None  # other tasks


def test_a_run_without_its_record_is_refused(script, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    _record(runs / "clm", "20260101-000000", rte=0.55, scratch=0.5)
    with pytest.raises(SystemExit, match="no GLUE record of mlm"):
        script.generated(_args(runs), ["clm", "mlm"])


def test_a_regression_gain_is_its_pearson_not_the_squared_error(script) -> None:
    """STS-B's record holds its paired interval on the squared error: the table shows the Pearson difference."""
    result = {
        "pearson_mean": 0.07,
        "scratch": {"pearson_mean": 0.14},
        "gain": {"mse": {"gain": -2.27, "interval": [-2.44, -2.09], "significant": True}},
    }
    assert script._gain_cells(result) == ("Pearson", "-7.0 (no interval)")
    assert script._gain_cells({"gain": {}}) == ("—", "—")
