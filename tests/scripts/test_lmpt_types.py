"""lmpt's types stay checkable: few parameters typed `Any` (mypy checks nothing through them), and mypy's own
settings in pyproject.toml keep every `type: ignore` coded and needed (CI runs mypy before the tests)."""

import ast
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[2]
MOST_ANY_PARAMETERS = 30
"""Parameters lmpt may type `Any`: values of no fixed type (a formatted figure, a hash object, Hydra's callback
keywords). A config section, a model or an objective has its own type."""


def test_few_parameters_are_typed_any() -> None:
    found = []
    for path in sorted((ROOT / "lmpt").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                args = node.args
                every = [*args.posonlyargs, *args.args, *args.kwonlyargs, *filter(None, (args.vararg, args.kwarg))]
                found += [
                    f"{path.relative_to(ROOT)}:{node.lineno} {node.name}({a.arg})"
                    for a in every
                    if a.annotation is not None and ast.unparse(a.annotation) == "Any"
                ]
    assert len(found) < MOST_ANY_PARAMETERS, "\n".join(found)


def test_mypy_refuses_uncoded_and_unneeded_ignores() -> None:
    settings = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert settings["files"] == ["lmpt"]
    assert settings["warn_unused_ignores"] is True
    assert "ignore-without-code" in settings["enable_error_code"]
