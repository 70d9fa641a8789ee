"""Every config field is documented, and the README and `lmpt --help` show that documentation."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

from lmpt.config import objective_schema, optimizer_schema, schema
from lmpt.config.reference import GROUP_SCHEMAS, reference_markdown, reference_rows

REPO = Path(__file__).resolve().parents[2]


def test_every_field_of_every_schema_has_a_description() -> None:
    documented = {cls for classes in GROUP_SCHEMAS.values() for cls in classes}
    schemas = {
        c
        for module in (schema, objective_schema, optimizer_schema)
        for c in vars(module).values()
        if dataclasses.is_dataclass(c) and c is not schema.LmptConfig
    }
    bases = {objective_schema.ObjectiveConfig, schema.OptimizerConfig}
    assert schemas - bases <= documented
    missing = [key for _, key, _, doc in reference_rows() if not doc]
    assert missing == []


def test_readme_reference_is_the_generated_one() -> None:
    readme = (REPO / "README.md").read_text()
    start, end = "<!-- config-reference:start -->\n", "<!-- config-reference:end -->"
    assert readme[readme.index(start) + len(start) : readme.index(end)] == reference_markdown()


def test_help_lists_groups_options_and_every_key(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "lmpt", "--help"], cwd=tmp_path, capture_output=True, text=True, check=True,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    ).stdout  # fmt: skip
    listed = out.split("objective: ", 1)[1].split("\n", 1)[0].split(", ")
    assert {"clm", "electra", "mlm", "nsp", "prefix", "span", "ul2-mixture"} <= set(listed) and listed == sorted(listed)
    assert "model: base, large, small, tiny" in out
    assert "schema/" not in out
    for _, key, _, doc in reference_rows():
        assert key in out and doc[:40] in out, key
    assert not (tmp_path / "outputs").exists()
