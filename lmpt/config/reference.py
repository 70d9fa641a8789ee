"""The configuration reference, read from the docstrings under each schema field: one source for
`lmpt --help` and the README's table (a test keeps the README in step)."""

from __future__ import annotations

import ast
import dataclasses
import inspect
from functools import cache

from lmpt.config import objective_schema as objectives
from lmpt.config import optimizer_schema, schema

GROUP_SCHEMAS: dict[str, list[type]] = {
    "tokenizer": [schema.TokenizerConfig],
    "objective": [objectives.ClmConfig, objectives.MlmConfig, objectives.NspConfig, objectives.ElectraConfig,
                  objectives.SpanConfig, objectives.PrefixConfig, objectives.Ul2Config, objectives.MtpConfig,
                  objectives.FimConfig, objectives.DenoiserConfig],
    "model": [schema.ModelConfig],
    "optimizer": [schema.AdamWConfig, schema.AdafactorConfig, optimizer_schema.MuonConfig],
    "scheduler": [schema.SchedulerConfig],
    "data": [schema.DataConfig, schema.SourceConfig],
    "trainer": [schema.TrainerConfig],
    "downstream": [schema.DownstreamConfig],
}  # fmt: skip
_TITLES = {
    objectives.DenoiserConfig: "ul2-mixture: each entry of objective.denoisers",
    schema.SourceConfig: "data=mixture: each entry of data.sources",
}
_ENTRIES = (objectives.DenoiserConfig, schema.SourceConfig)  # list entries: their keys stand alone


@cache
def _docstrings() -> dict[str, dict[str, str]]:
    """class name -> field -> the string literal right under the field, for every class of the schema modules."""
    found: dict[str, dict[str, str]] = {}
    nodes = [
        node for module in (schema, objectives, optimizer_schema) for node in ast.parse(inspect.getsource(module)).body
    ]
    for node in nodes:
        if isinstance(node, ast.ClassDef):
            docs, body = {}, node.body
            for field, after in zip(body, body[1:], strict=False):
                if isinstance(field, ast.AnnAssign) and isinstance(after, ast.Expr):
                    if isinstance(after.value, ast.Constant) and isinstance(after.value.value, str):
                        docs[field.target.id] = " ".join(after.value.value.split())
            found[node.name] = docs
    return found


def field_doc(cls: type, name: str) -> str:
    """A field's description, inherited from the nearest base class that documents it."""
    for klass in cls.__mro__:
        doc = _docstrings().get(klass.__name__, {}).get(name)
        if doc:
            return doc
    return ""


def _default(field: dataclasses.Field) -> str:
    if field.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        value = field.default_factory()  # type: ignore[misc]
        return "[...]" if value and dataclasses.is_dataclass(value[0]) else str(value)
    return "???" if field.default == "???" else str(field.default)


def reference_rows() -> list[tuple[str, str, str, str]]:
    """(section, key, default, description) for every field of every group."""
    rows = []
    for group, classes in GROUP_SCHEMAS.items():
        for cls in classes:
            if cls in _TITLES:
                section = _TITLES[cls]
            else:
                options = [c for c in classes if c not in _TITLES]  # the group's options (entries have titles)
                section = group if len(options) == 1 else f"{group}={cls().name}"
            prefix = "" if cls in _ENTRIES else f"{group}."
            for field in dataclasses.fields(cls):
                rows.append((section, f"{prefix}{field.name}", _default(field), field_doc(cls, field.name)))
    return rows


def reference_markdown() -> str:
    lines, section = [], None
    for sec, key, default, doc in reference_rows():
        if sec != section:
            section = sec
            lines += ["", f"**{sec}**", "", "| key | default | description |", "| --- | --- | --- |"]
        lines.append(f"| `{key}` | `{default}` | {doc} |")
    return "\n".join(lines[1:]) + "\n"


def reference_text() -> str:
    lines, section = [], None
    width = max(len(key) for _, key, _, _ in reference_rows())
    for sec, key, default, doc in reference_rows():
        if sec != section:
            section = sec
            lines += ["", f"{sec}:"]
        lines.append(f"  {key:<{width}}  {doc} [{default}]")
    return "\n".join(lines[1:])


if __name__ == "__main__":
    print(reference_markdown())
