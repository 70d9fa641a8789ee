"""The configuration reference, read from the docstrings under each schema field: one source for
`lmpt --help` and the README's table (a test keeps the README in step)."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import sys
import typing
from functools import cache

from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

from lmpt.config import quality_schema, schema

STATIC_SCHEMAS: dict[str, list[type]] = {
    "tokenizer": [schema.TokenizerConfig],
    "model": [schema.ModelConfig],
    "optimizer": [schema.AdamWConfig, schema.AdafactorConfig, schema.MuonConfig],
    "scheduler": [schema.SchedulerConfig],
    "data": [schema.DataConfig, schema.SourceConfig],
    "trainer": [schema.TrainerConfig],
    "downstream": [schema.DownstreamConfig],
    "quality": [quality_schema.QualityConfig],
}
"""The groups whose schemas the config layer defines; the objective group's come from ConfigStore."""
_TITLES: dict[type, str] = {schema.SourceConfig: "data=mixture: each entry of data.sources"}
"""List entries: their keys stand alone, under a title of their own."""


def objective_schemas() -> tuple[list[type], dict[type, str]]:
    """The objective group's schemas as registered with Hydra's ConfigStore (by lmpt.objectives.registry: the
    config layer never imports the objectives), then the entry classes of their list fields (ul2-mixture's
    denoisers) with their titles."""
    nodes = ConfigStore.instance().repo.get("schema", {}).get("objective", {})
    options: list[type] = [t for t in (OmegaConf.get_type(node.node) for node in nodes.values()) if t is not None]
    entries: dict[type, str] = {}
    for cls in options:
        for name, hint in typing.get_type_hints(cls).items():
            (arg,) = typing.get_args(hint) or (None,)
            if typing.get_origin(hint) is list and isinstance(arg, type) and dataclasses.is_dataclass(arg):
                entries[arg] = f"{cls().name}: each entry of objective.{name}"
    return [*options, *entries], entries


def group_schemas() -> dict[str, list[type]]:
    """group -> its schema classes, in the order of `lmpt --help` and the README's table."""
    groups = dict(STATIC_SCHEMAS)
    return {"tokenizer": groups.pop("tokenizer"), "objective": objective_schemas()[0], **groups}


def _titles() -> dict[type, str]:
    return {**_TITLES, **objective_schemas()[1]}


def _docstrings() -> dict[str, dict[str, str]]:
    """class name -> field -> the string literal right under the field, for every class of the schema modules."""
    classes = [klass for group in group_schemas().values() for cls in group for klass in cls.__mro__]
    return _module_docstrings(tuple(dict.fromkeys(k.__module__ for k in classes if k is not object)))


@cache
def _module_docstrings(modules: tuple[str, ...]) -> dict[str, dict[str, str]]:
    found: dict[str, dict[str, str]] = {}
    for node in (n for name in modules for n in ast.parse(inspect.getsource(sys.modules[name])).body):
        if isinstance(node, ast.ClassDef):
            docs, body = {}, node.body
            for field, after in zip(body, body[1:], strict=False):
                if isinstance(field, ast.AnnAssign) and isinstance(after, ast.Expr):
                    if isinstance(after.value, ast.Constant) and isinstance(after.value.value, str):
                        assert isinstance(field.target, ast.Name)  # a class body's annotated name
                        docs[field.target.id] = " ".join(after.value.value.split())
            found[node.name] = docs
    return found


def field_doc(cls: type, name: str, docs: dict[str, dict[str, str]] | None = None) -> str:
    """A field's description, inherited from the nearest base class that documents it (`docs`: `_docstrings()`,
    read once by a caller that asks for many fields)."""
    docs = _docstrings() if docs is None else docs
    for klass in cls.__mro__:
        doc = docs.get(klass.__name__, {}).get(name)
        if doc:
            return doc
    return ""


def _default(field: dataclasses.Field) -> str:
    if field.default_factory is not dataclasses.MISSING:
        value = field.default_factory()
        return "[...]" if value and dataclasses.is_dataclass(value[0]) else str(value)
    return "???" if field.default == "???" else str(field.default)


def reference_rows() -> list[tuple[str, str, str, str]]:
    """(section, key, default, description) for every field of every group."""
    rows, titles, docs = [], _titles(), _docstrings()
    for group, classes in group_schemas().items():
        for cls in classes:
            if cls in titles:
                section = titles[cls]
            else:
                options = [c for c in classes if c not in titles]  # the group's options (entries have titles)
                section = group if len(options) == 1 else f"{group}={cls().name}"
            prefix = "" if cls in titles else f"{group}."
            for field in dataclasses.fields(cls):
                rows.append((section, f"{prefix}{field.name}", _default(field), field_doc(cls, field.name, docs)))
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
    lines, section, rows = [], None, reference_rows()
    width = max(len(key) for _, key, _, _ in rows)
    for sec, key, default, doc in rows:
        if sec != section:
            section = sec
            lines += ["", f"{sec}:"]
        lines.append(f"  {key:<{width}}  {doc} [{default}]")
    return "\n".join(lines[1:])


if __name__ == "__main__":
    print(reference_markdown())
