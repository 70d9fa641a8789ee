"""Every command the README and docs/ print is pasteable as printed: each fenced command line is valid bash, and each
Hydra command's overrides (lmpt, lmpt-study, lmpt-prepare) parse in Hydra's own grammar after bash has removed its
quotes, as they would when pasted (`study.run_keys=['data=wikitext',...]` unquoted did not: bash drops the quotes and
Hydra reads `data=wikitext` inside a list)."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser

REPO = Path(__file__).resolve().parents[1]
HYDRA_COMMANDS = ("lmpt", "lmpt-study", "lmpt-prepare")
COMMAND = re.compile(r"^(lmpt(-[a-z]+)?|python -m lmpt)(\s|$)")


def documented_commands() -> list[tuple[str, str]]:
    """(where, command line) of every lmpt command in a fenced block of the README or docs/, continuations joined
    and trailing comments dropped."""
    found = []
    for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for block in re.findall(r"```(?:bash|sh|console)?\n(.*?)```", path.read_text(encoding="utf-8"), re.S):
            for line in block.replace("\\\n", " ").splitlines():
                line = line.strip().removeprefix("$ ")
                if COMMAND.match(line):
                    found.append((path.name, line))
    return found


COMMANDS = documented_commands()


def test_the_documents_print_commands() -> None:
    assert len(COMMANDS) > 50 and any("lmpt-reproduce" in line for _, line in COMMANDS)


def test_every_documented_command_is_valid_bash() -> None:
    script = "\n".join(line for _, line in COMMANDS)
    done = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("where,line", COMMANDS, ids=[f"{w}:{i}" for i, (w, _) in enumerate(COMMANDS)])
def test_every_hydra_command_parses_as_pasted(where: str, line: str) -> None:
    words = shlex.split(line, comments=True)
    if words[:3] == ["python", "-m", "lmpt"]:
        words = ["lmpt", *words[3:]]
    if words[0] not in HYDRA_COMMANDS:
        return
    overrides = [w for w in words[1:] if "=" in w and not w.startswith("-")]
    OverridesParser.create().parse_overrides(overrides)  # raises on what Hydra would refuse
