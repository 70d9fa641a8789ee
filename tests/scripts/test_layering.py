"""scripts/layering.py on a tiny synthetic lmpt package built in tmp_path (never on the real tree, which changes)."""

from __future__ import annotations

import importlib.util
import json
import textwrap
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "layering.py"
spec = importlib.util.spec_from_file_location("layering", SCRIPT)
layering = importlib.util.module_from_spec(spec)
spec.loader.exec_module(layering)

FILES = {
    "__init__.py": "",
    "cli.py": """
        from .train import run_training

        def train(cfg):
            return run_training(cfg)
    """,
    "config.py": """
        from typing import TYPE_CHECKING

        if TYPE_CHECKING:
            from lmpt.cli import train  # type-only, up: config -> entry

        MODES = ("clm", "mlm")  # one line of objective names in a module-level constant

        def validate(cfg):
            from lmpt.train import budget  # lazy, up: config -> train, closes the circle with train -> config
            return budget(cfg)  # the root config climbs from config to train

        def describe(cfg):
            return {"clm": 1, "mlm": 2}.get(cfg.objective.name)  # a dict keyed on objective names
    """,
    "train.py": """
        '''Trains under "clm" (a docstring, not a comparison).'''
        import copy

        from lmpt import config
        from lmpt.config import validate

        def run_training(cfg):
            root = copy.deepcopy(cfg)
            validate(root)
            Loop(root.trainer)  # a section, not the root: no edge
            loop = Loop(cfg)
            print(root)  # not resolvable: skipped and counted
            if cfg.objective.name == "clm":
                loop.step()
            if cfg.model.attention == "prefix":  # an attention mode, not an objective
                pass
            return f"{'clm' == 'mlm'}"  # inside an f-string: not counted

        class Loop:
            def __init__(self, cfg):
                self.cfg, self.trainer = cfg, cfg.trainer  # a tuple assignment: self.cfg is the root

            def step(self):
                return config.describe(self.cfg)

        def budget(trainer):
            return trainer
    """,
    "objectives/__init__.py": "",
    "objectives/clm.py": """
        from typing import ClassVar

        class Clm:
            name: ClassVar[str] = "clm"

        class Mlm:
            name = "mlm"

        class Prefix:
            name = "prefix"

        def is_clm(x):
            return x == "clm"  # inside objectives/: not counted
    """,
}


@pytest.fixture
def package(tmp_path: Path) -> Path:
    for name, text in FILES.items():
        path = tmp_path / "lmpt" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return tmp_path / "lmpt"


def test_import_graph_circles_and_arrows_up(package: Path) -> None:
    edges = layering.import_graph(layering.load_package(package))
    pairs = {(e.src, e.dst): e for e in edges}
    assert set(pairs) == {
        ("lmpt.cli", "lmpt.train"),
        ("lmpt.train", "lmpt.config"),
        ("lmpt.config", "lmpt.train"),
        ("lmpt.config", "lmpt.cli"),
    }
    assert pairs["lmpt.config", "lmpt.cli"].type_only and pairs["lmpt.config", "lmpt.train"].lazy
    assert layering.cycles(edges) == [["lmpt.config", "lmpt.train"]]
    assert layering.cycles(edges, runtime_only=False) == [["lmpt.cli", "lmpt.config", "lmpt.train"]]
    ups = {(u["src"], u["dst"], u["type_only"], u["lazy"]) for u in layering.up_arrows(edges)}
    assert ups == {("lmpt.config", "lmpt.train", False, True), ("lmpt.config", "lmpt.cli", True, False)}


def test_layers_match_whole_components() -> None:
    assert layering.layer_of("lmpt") == 0 and layering.layer_of("lmpt.config.schema") == 1
    assert layering.layer_of("lmpt.train.rundir") == layering.layer_of("lmpt.train")
    assert layering.layer_of("lmpt.configx") is None


def test_root_config_walk(package: Path) -> None:
    walk = layering.config_walk(layering.load_package(package))
    assert walk["files"] == ["lmpt/cli.py", "lmpt/config.py", "lmpt/train.py"]
    assert walk["call_edges"] == 5  # cli->run_training, validate, Loop.__init__, step->describe, validate->budget
    assert walk["climbs"] == ["lmpt.config:validate -> lmpt.train:budget"]
    assert walk["unresolved_callees"] == {"copy.deepcopy": 1, "print": 1}  # third-party and builtins: skipped


def test_objective_names_compared(package: Path) -> None:
    mods = layering.load_package(package)
    assert layering.objective_names(mods) == ["clm", "mlm", "prefix"]
    hits = layering.objective_compares(mods, layering.objective_names(mods))

    def at(name: str, needle: str) -> str:
        lines = (package / name).read_text().splitlines()
        return f"lmpt/{name}:{next(i for i, text in enumerate(lines, 1) if needle in text)}"

    assert hits == [at("config.py", "MODES ="), at("config.py", '{"clm": 1, "mlm": 2}'), at("train.py", '== "clm"')]
    (package / "objectives" / "clm.py").write_text("")
    assert layering.objective_names(layering.load_package(package)) == list(layering.FALLBACK_OBJECTIVES)


def test_main_writes_json_and_fails_on_request(package: Path, tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    assert layering.main(["--package", str(package), "--json", str(out), "--max-up", "2"]) == 0
    figures = json.loads(out.read_text())
    assert (figures["modules"], len(figures["cycles"]), len(figures["up_arrows"])) == (6, 1, 2)
    assert figures["config_walk"]["call_edges"] == 5 and len(figures["objective_compares"]) == 3
    assert layering.main(["--package", str(package), "--fail-on-cycles"]) == 1
    assert layering.main(["--package", str(package), "--max-up", "1"]) == 1
    (package / "extra.py").write_text("")
    assert layering.main(["--package", str(package)]) == 2  # a module in no layer


DOWNSTREAM = {
    "__init__.py": "",
    "downstream/__init__.py": "",
    "downstream/figures.py": "ACCURACY = 'accuracy'\n",
    "downstream/labelled.py": "from lmpt.downstream.figures import ACCURACY\n",
    "downstream/kinds/__init__.py": "",
    "downstream/kinds/pairs.py": """
        from lmpt.downstream import labelled

        class Pairs:
            kind = "pairs"

        def mine(kind):
            return kind == "pairs"  # inside kinds/: not counted
    """,
    "downstream/likelihood.py": """
        from lmpt.downstream.labelled import ACCURACY

        def is_pairs(kind):
            from lmpt.downstream.kinds import pairs  # lazy, up: engines -> kinds
            return kind == "pairs"  # a kind's name compared outside kinds/
    """,
    "downstream/stray.py": "",
}


def test_the_downstream_package_is_measured_on_its_own_floors(tmp_path: Path) -> None:
    for name, text in DOWNSTREAM.items():
        path = tmp_path / "lmpt" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    figures = layering.analyse(tmp_path / "lmpt")
    sub = figures["subpackage"]
    assert (sub["package"], sub["files"], sub["arrows"], sub["depth"]) == ("lmpt.downstream", 7, 4, 4)
    assert sub["floors"][0] == "figures" and sub["unfloored"] == ["lmpt.downstream.stray"]
    assert [(u["src"], u["dst"], u["lazy"]) for u in sub["up_arrows"]] == [
        ("lmpt.downstream.likelihood", "lmpt.downstream.kinds.pairs", True)
    ]
    assert figures["kind_names"] == ["pairs"]
    assert figures["kind_compares"] == ["lmpt/downstream/likelihood.py:6"]
    assert "lmpt.downstream: 7 files" in layering.report(figures)
