"""scripts/objective_study.py: the worked study's tables come from a study's records (BLiMP on equal-length pairs;
the fine-tuned figure beside its scratch control, gain interval and floor; the epochs), written a handful of columns
each between the document's markers with the discussion around them kept; every figure (study_full.md, BLiMP per
field, the searched fine-tuning recipes) goes to docs/objective_study_full.md, which the document links. No machine
path reaches either."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture()
def script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    spec = importlib.util.spec_from_file_location("objective_study", REPO / "scripts" / "objective_study.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    doc = tmp_path / "docs" / "objective_study.md"
    doc.parent.mkdir()
    doc.write_text(f"# Title\n\nintro\n\n{module.START}\nold tables\n{module.END}\n\n## What it shows\n\nkept\n")
    monkeypatch.setattr(module, "DOC", doc)
    return module


def _final(root: Path, name: str, seed: int, blimp: float, pretrained: float, scratch: float, low: float) -> dict:
    run = root / f"{name}-seed{seed}"
    (run / "downstream").mkdir(parents=True)
    (run / "downstream" / "blimp-fast.json").write_text(
        json.dumps(
            {
                "n": 2010,
                "accuracy": blimp,
                "accuracy_low": blimp - 0.02,
                "accuracy_high": blimp + 0.02,
                "fields": {"syntax": {"accuracy": blimp + 0.01}, "morphology": {"accuracy": blimp - 0.01}},
                "equal_length": {"n": 939, "accuracy": 0.49},
                "length_baseline": 0.47,
            }
        )
    )
    (run / "downstream" / "clinc-domains.json").write_text(
        json.dumps(
            {
                "accuracy_mean": pretrained,
                "majority_accuracy": 0.1,
                "lr": 0.01,
                "pooling": "mean",
                "mode": "probe",
                "seeds": 3,
                "epochs": 3,
                "train_examples": 3000,
                "dev_examples": 3000,
                "scratch": {"accuracy_mean": scratch, "lr": 0.03, "pooling": "first"},
                "bag_of_words": {"accuracy": 0.87},
                "gain": {
                    "accuracy": {
                        "gain": pretrained - scratch,
                        "interval": [low, low + 0.04],
                        "significant": not low <= 0 <= low + 0.04,
                    }
                },
            }
        )
    )
    return {
        "run": str(run),
        "status": "completed",
        "step": 540,
        "epochs": 2.88,
        "val_loss": 4.0 + seed / 10,
        "budget": "1e13flops",
    }


def test_the_tables_come_from_the_records_and_only_the_generated_part_changes(script, tmp_path: Path) -> None:
    study_dir = tmp_path / "study"
    runs = tmp_path / "runs"
    study = {
        "plan": {"budgets": ["1e13flops"]},
        "objectives": {
            "clm": {
                "search": {"chosen_recipe": {"optimizer.lr": "0.0378"}},
                "finals": [_final(runs, "clm", s, 0.55, 0.45, 0.50, -0.07) for s in (0, 1)],
            },
            "mlm": {
                "search": {"chosen_recipe": {"optimizer.lr": "0.02"}},
                "finals": [_final(runs, "mlm", s, 0.52, 0.60, 0.55, 0.01) for s in (0, 1)],
            },
        },
    }
    study_dir.mkdir()
    (study_dir / "study.json").write_text(json.dumps(study))
    (study_dir / "study.md").write_text(
        "# Study study\n\nplan line\n\n![curves](curves.png)\n\nEvery figure: [study_full.md](study_full.md).\n"
    )
    (study_dir / "study_full.md").write_text(
        "# Study study: every figure\n\nThe full tables behind [study.md]"
        "(study.md).\n\n## Objectives: every figure\n\n| wide |\n\n"
        "![ranking.png](ranking.png)\n"
    )
    (study_dir / script.WALL).write_text(json.dumps({"wall_s": 3600.0, "command": "lmpt-study study.dir=x"}))
    script.write_doc(study_dir)
    text = script.DOC.read_text()
    assert text.startswith("# Title\n\nintro\n\n") and text.endswith("## What it shows\n\nkept\n")
    assert "old tables" not in text and "1.00 h of wall time" in text and "lmpt-study study.dir=x" in text
    assert "![curves](objective_study_curves.png)" in text and "plan line" in text
    full = script.full_doc().read_text()  # the per-field BLiMP table and the fine-tuning recipes live there now
    assert "| clm | 0.550 ± 0.000 | [0.530, 0.570] [0.530, 0.570] | 0.540 ± 0.000 | 0.560 ± 0.000 |" in full
    assert "| mlm | 0.600 ± 0.000 | 0.550 ± 0.000 | 0.050 ± 0.000 | [+0.010, +0.050] [+0.010, +0.050] |" in text
    assert "[-0.070, -0.030] n.s." not in text and "[-0.070, -0.030]" in text  # significant (below 0)
    assert "lr 0.01 mean / lr 0.03 first" in full
    assert "| clm | 1e13flops | optimizer.lr=0.0378 | 540 | 2.88 | 4.050 ± 0.071 |" in text


def _columns(markdown: str) -> list[int]:
    """The number of columns of each table row."""
    return [len(line.split(" | ")) for line in markdown.splitlines() if line.startswith("| ")]


def test_the_document_fits_a_page_links_every_figure_and_shows_no_machine_path(script, tmp_path: Path) -> None:
    study_dir = tmp_path / "somewhere" / "objective-study"
    runs = tmp_path / "runs"
    study = {
        "plan": {"budgets": ["1e13flops"]},
        "objectives": {
            "clm": {
                "search": {"chosen_recipe": {"optimizer.lr": "0.037861878865426045"}},
                "finals": [_final(runs, "clm", s, 0.55, 0.45, 0.50, -0.07) for s in (0, 1)],
            }
        },
    }
    study_dir.mkdir(parents=True)
    (study_dir / "study.json").write_text(json.dumps(study))
    (study_dir / "study.md").write_text("# Study x\n\nEvery figure: [study_full.md](study_full.md).\n")
    (study_dir / "study_full.md").write_text(
        "# Study x: every figure\n\nThe full tables behind [study.md](study.md).\n\n## Objectives: every figure\n"
    )
    (study_dir / script.WALL).write_text(json.dumps({"wall_s": 60.0, "command": f"lmpt-study study.dir={study_dir}"}))
    script.write_doc(study_dir)
    text, full = script.DOC.read_text(), script.full_doc().read_text()
    assert script.full_doc().name == "objective_study_full.md"
    assert "Figures from the default study (conf/study.yaml) `lmpt-study study.dir=objective-study`" in text
    assert str(tmp_path) not in text and str(tmp_path) not in full
    assert "Every figure: [objective_study_full.md](objective_study_full.md)." in text and "[study_full" not in text
    assert "[objective_study.md](objective_study.md)" in full and "## BLiMP (fast subset) per field" in full
    assert max(_columns(text)) <= 7 and max(_columns(full)) > 7  # a handful in the document, every one beside it
    assert "optimizer.lr=0.0379" in text and "0.0378618" not in text


def test_a_study_without_its_full_tables_is_refused_and_nothing_is_written(script, tmp_path: Path) -> None:
    study_dir = tmp_path / "study"
    study_dir.mkdir()
    (study_dir / "study.json").write_text(json.dumps({"plan": {"budgets": ["1e13flops"]}, "objectives": {}}))
    (study_dir / "study.md").write_text("# Study study\n")
    before = script.DOC.read_text()
    with pytest.raises(SystemExit, match="study_full.md is missing: run the study's command again"):
        script.write_doc(study_dir)
    assert script.DOC.read_text() == before and not script.full_doc().exists()
