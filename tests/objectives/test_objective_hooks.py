"""An objective is known in one place: a toy tenth objective, defined here and nowhere else, is listed, composes
through Hydra with its own schema, builds, and is framed, exported and previewed through its hooks; and no lmpt
module outside lmpt/objectives/ compares objective names."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import ClassVar

import pytest
import torch
from composed import composed
from hydra.core.config_store import ConfigStore
from objective_helpers import FakeTokenizer
from omegaconf import OmegaConf

from lmpt.batch import IGNORE, Batch
from lmpt.config.reference import reference_rows
from lmpt.config.schema import ARCHITECTURES
from lmpt.data.sampler import Windows
from lmpt.downstream.likelihood import Framed, frame, method_of
from lmpt.errors import LmptError
from lmpt.hf.export import export_kind
from lmpt.objectives.base import Objective, ScoringFrame
from lmpt.objectives.registry import (
    OBJECTIVES,
    build_objective,
    objective_class,
    register_objective,
    register_objective_schemas,
    unregister_objective,
)
from lmpt.objectives.schema import ObjectiveConfig
from lmpt.preview.render import legend, settings
from lmpt.rundir.trained import Trained
from lmpt.tokenizer.special import SpecialTokens

LMPT = Path(__file__).resolve().parents[2] / "lmpt"


@dataclass
class ToyConfig(ObjectiveConfig):
    name: str = "toy"
    echo_prob: float = 0.5
    """Share of each window the toy repeats (documentation, as every schema field has)."""


class ToyEcho(Objective):
    """A tenth objective: clm-like next-token prediction, with hooks of its own."""

    name: ClassVar[str] = "toy"
    config_class: ClassVar[type] = ToyConfig
    natural_arch: ClassVar[str] = "decoder"
    supported_archs: ClassVar[tuple[str, ...]] = ("decoder",)
    reads_prefix: ClassVar[bool] = True
    export_refusal: ClassVar[str] = "a toy has no transformers counterpart"

    @property
    def window_length(self) -> int:
        return self.seq_len + 1

    def make_batch(self, windows: Windows, gen: torch.Generator) -> Batch:
        labels = windows.tokens[:, 1:].clone()
        labels[labels == self.special.pad] = IGNORE
        return Batch(input_ids=windows.tokens[:, :-1].clone(), labels=labels, attention="causal")

    @classmethod
    def scoring_frame(cls, special: SpecialTokens, context: list[int], target: list[int]) -> ScoringFrame:
        return ScoringFrame([special.s2s], context, [special.sep], target)

    def preview_legend(self) -> list[tuple[str, str]]:
        return [("echo", "mode")]

    def preview_settings(self) -> list[str]:
        return [f"echoes {self.cfg.echo_prob:.0%} of each window"]


@pytest.fixture
def toy() -> Iterator[type[Objective]]:
    register_objective(ToyEcho)  # the documented path for an objective defined outside lmpt.objectives
    register_objective_schemas()
    # stands in for conf/objective/toy.yaml, which starts from its schema as every objective's yaml does
    ConfigStore.instance().store(group="objective", name="toy", node={"defaults": ["/schema/objective/toy@_here_"]})
    yield ToyEcho
    unregister_objective("toy")
    ConfigStore.instance().repo["objective"].pop("toy.yaml", None)


def test_a_tenth_objective_is_listed_and_documented(toy: type[Objective]) -> None:
    assert list(OBJECTIVES)[-1] == "toy" and objective_class("toy") is toy
    with pytest.raises(LmptError, match=r"choose one of clm, mlm, .*, fim, clm-then-mlm, gpt-bert, mdlm, toy$"):
        build_objective(OmegaConf.create({"name": "nope"}), FakeTokenizer(), 16, "auto")
    rows = [row for row in reference_rows() if row[0] == "objective=toy"]
    assert rows[-1][1:3] == ("objective.echo_prob", "0.5")
    assert rows[-1][3].startswith("Share of each window the toy repeats")


def test_a_tenth_objective_composes_with_its_schema_and_builds(toy: type[Objective]) -> None:
    cfg = composed("objective=toy", "objective.echo_prob=0.25")
    assert OmegaConf.get_type(cfg.objective) is ToyConfig and cfg.objective.echo_prob == 0.25
    with pytest.raises(Exception, match="echo_prob"):
        composed("objective=toy", "objective.echo_prob=lots")
    objective = build_objective(cfg.objective, FakeTokenizer(), 16, "auto")
    assert isinstance(objective, toy) and objective.arch == "decoder"
    batch = objective.make_batch(
        Windows(torch.arange(40, 74).reshape(2, 17), torch.zeros(2, dtype=torch.long), None), torch.Generator()
    )
    assert batch.input_ids.shape == (2, 16)
    model = objective.build_model(cfg.model, 200)
    assert model.max_seq_len >= 16
    assert legend(objective) == [("echo", "mode")]
    assert settings(objective)[-1] == "echoes 25% of each window"
    # a hook the preview calls is declared on Objective: a new objective inherits its architecture's attention line
    assert objective.describe_attention() == "causal: each position sees itself and earlier positions"


def test_a_tenth_objective_frames_and_exports_through_its_hooks(toy: type[Objective]) -> None:
    tokenizer = FakeTokenizer()
    special = tokenizer.special
    trained = Trained(
        SimpleNamespace(max_seq_len=32),
        tokenizer,
        OmegaConf.create({"model": {}}),
        "decoder",
        "toy",
        Path("model.safetensors"),
    )
    assert trained.objective is toy
    assert frame(trained, [50, 51], [60]) == Framed([special.s2s, 50, 51, special.sep], [60], 0)
    assert method_of(trained).endswith("(context as bidirectional prefix)")
    assert export_kind(trained) == "toy"


def _objective_literals(node: ast.AST, names: set[str]) -> list[str]:
    elements = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return [e.value for e in elements if isinstance(e, ast.Constant) and e.value in names]


def name_comparisons(package: Path) -> list[str]:
    """file:line outside lmpt/objectives/ that compares a value with an objective name, or keys a dict or lists a
    tuple by objective names (a dict whose keys are all objective or architecture names). `attention == "prefix"`
    is an attention mode, and a "prefix" key among others ("suffix", "middle") a field, not an objective."""
    names = set(OBJECTIVES)
    found = []
    for path in sorted(package.rglob("*.py")):
        if path.parent.name == "objectives":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            hit = False
            if isinstance(node, ast.Compare):
                operands = [node.left, *node.comparators]
                hit = any(_objective_literals(o, names) for o in operands) and "attention" not in ast.unparse(node)
            elif isinstance(node, ast.Dict):
                keys = [k.value for k in node.keys if isinstance(k, ast.Constant)]
                hit = bool(set(keys) & names) and set(keys) <= names | set(ARCHITECTURES)
            elif isinstance(node, (ast.Tuple, ast.List, ast.Set)) and len(node.elts) > 1:
                hit = len(_objective_literals(node, names)) == len(node.elts)
            if hit:
                found.append(f"{path.relative_to(package.parent)}:{node.lineno}")
    return found


def test_no_module_outside_the_objectives_compares_objective_names() -> None:
    assert name_comparisons(LMPT) == []


def test_the_check_sees_a_comparison(tmp_path: Path) -> None:
    (tmp_path / "lmpt").mkdir()
    (tmp_path / "lmpt" / "x.py").write_text(
        'KINDS = ("mlm", "nsp")\nok = attention == "prefix"\nbad = name == "clm"\nd = {"span": 1, "decoder": 2}\n'
        'fine = {"prefix": 1, "suffix": 2}\n'
    )
    assert name_comparisons(tmp_path / "lmpt") == ["lmpt/x.py:1", "lmpt/x.py:3", "lmpt/x.py:4"]
