"""Every config field is documented, and docs/configuration.md and `lmpt --help` show that documentation."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from runner import run_lmpt

from lmpt.config import schema
from lmpt.config.reference import group_schemas, reference_markdown, reference_rows
from lmpt.objectives.registry import OBJECTIVES, register_objective_schemas
from lmpt.objectives.schema import ObjectiveConfig

REPO = Path(__file__).resolve().parents[2]
register_objective_schemas()  # as `lmpt` does before --help: the reference reads them from Hydra's ConfigStore
OBJECTIVE_MODULES = tuple(sys.modules[cls.__module__] for cls in OBJECTIVES.values())
GROUP_SCHEMAS = group_schemas()


def test_every_field_of_every_schema_has_a_description() -> None:
    documented = {cls for classes in GROUP_SCHEMAS.values() for cls in classes}
    schemas = {
        c
        for module in (schema, *OBJECTIVE_MODULES)
        for c in vars(module).values()
        if dataclasses.is_dataclass(c) and c is not schema.LmptConfig and c.__name__.endswith("Config")
    }
    bases = {ObjectiveConfig, schema.OptimizerConfig}
    assert schemas - bases <= documented
    missing = [key for _, key, _, doc in reference_rows() if not doc]
    assert missing == []


def test_readme_reference_is_the_generated_one() -> None:
    readme = (REPO / "docs" / "configuration.md").read_text()
    start, end = "<!-- config-reference:start -->\n", "<!-- config-reference:end -->"
    assert readme[readme.index(start) + len(start) : readme.index(end)] == reference_markdown()


def test_help_lists_groups_options_and_every_key(tmp_path: Path) -> None:
    done = run_lmpt("--help", cwd=tmp_path, env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    out = done.stdout
    listed = out.split("objective: ", 1)[1].split("\n", 1)[0].split(", ")
    assert {"clm", "electra", "mlm", "nsp", "prefix", "span", "ul2-mixture"} <= set(listed) and listed == sorted(listed)
    assert "model: base, large, micro, small, tiny" in out
    assert "schema/" not in out
    for _, key, _, doc in reference_rows():
        assert key in out and doc[:40] in out, key
    assert not (tmp_path / "outputs").exists()
