"""The package keeps the shape issue 33 gave it, measured by scripts/layering.py on the real tree: data flows one
way (no import circle, no import running up the layers), the training entry stays a table of contents, the root
config reaches few files, and no module outside lmpt/objectives/ asks an objective its name."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("layering", REPO / "scripts" / "layering.py")
layering = importlib.util.module_from_spec(spec)
spec.loader.exec_module(layering)
FIGURES = layering.analyse(REPO / "lmpt")


def test_every_module_has_a_layer_and_no_import_runs_up_or_in_a_circle() -> None:
    assert FIGURES["unlayered"] == []
    assert FIGURES["cycles_including_type_only"] == []
    assert [f"{a['src']} -> {a['dst']}" for a in FIGURES["up_arrows"] if not a["type_only"]] == []
    assert len(FIGURES["up_arrows"]) <= 1  # a type-only import, at most


def test_the_training_entry_imports_at_most_twenty_lmpt_modules() -> None:
    assert FIGURES["imports_per_module"]["lmpt.train.run"] <= 20


def test_the_loop_composes_at_most_twelve_modules_and_run_training_reads_as_a_table_of_contents() -> None:
    assert FIGURES["imports_per_module"]["lmpt.train.loop"] <= 12
    tree = ast.parse((REPO / "lmpt" / "train" / "run.py").read_text(encoding="utf-8"))
    (run_training,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "run_training"]
    assert run_training.end_lineno - run_training.lineno + 1 < 60


def test_no_module_holds_more_than_600_lines() -> None:
    """Issue 64: a module is one concept, cut by cohesion rather than a count of files (docs/layout.md); a module
    over 600 lines has merged several, so none is."""
    modules = [p for p in (REPO / "lmpt").rglob("*.py")]
    long = {
        str(p.relative_to(REPO)): n for p in modules if (n := len(p.read_text(encoding="utf-8").splitlines())) > 600
    }
    assert long == {}


def test_the_root_config_reaches_at_most_45_files_and_never_climbs() -> None:
    walk = FIGURES["config_walk"]
    assert "lmpt/train/run.py" in walk["files"]  # the walk follows the RunSpec that carries the config
    assert len(walk["files"]) <= 45 and walk["climbs"] == []


def test_no_objective_name_is_compared_outside_the_objectives() -> None:
    assert FIGURES["objective_compares"] == []


def test_downstream_stands_on_its_floors_and_compares_no_kind_name_outside_its_kinds() -> None:
    sub = FIGURES["subpackage"]
    assert sub["unfloored"] == [] and sub["up_arrows"] == []
    assert sub["floors"] == ["figures", "sources", "engines", "task", "kinds", "commands"]
    assert sub["depth"] <= 7  # issue 52: the longest chain of imports inside it
    assert set(FIGURES["kind_names"]) >= {"choice", "pairs", "classification"}
    assert FIGURES["kind_compares"] == []
