"""The one command-line mechanism of lmpt's commands other than the Hydra ones (`lmpt`, `lmpt-prepare`,
`lmpt-preview`, `lmpt-study`): `lmpt-generate RUN prompt="..." max_tokens=50`, positional paths (the last one may take
several: `lmpt-compare PATH... out=DIR`), then key=value options parsed into a typed dataclass whose field docstrings
are the `--help` text; a field typed as a dataclass of its own takes dotted keys (`data.train=...`). Every mistake is
one line and exit 2."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import sys
import types
import typing
from collections.abc import Callable
from enum import Enum
from typing import Any, NoReturn, TypeVar, cast

from lmpt.console import console
from lmpt.errors import LmptError
from lmpt.stopping import EXIT_INTERRUPTED

T = TypeVar("T")
_NONE_WORDS = ("none", "null")


def field_docs(cls: type) -> dict[str, str]:
    """Field -> the string literal right under it in the class body."""
    body = ast.parse(inspect.getsource(cls)).body[0].body  # type: ignore[attr-defined]
    docs = {}
    for field, after in zip(body, body[1:], strict=False):
        if isinstance(field, ast.AnnAssign) and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant):
            assert isinstance(field.target, ast.Name)  # a class body's annotated name
            docs[field.target.id] = " ".join(str(after.value.value).split())
    return docs


def _convert(key: str, raw: str, kind: Any) -> Any:
    """`raw` as the field's type: str, int, float, bool, list[str], a Choice (one of its members, by name), or any of
    them | None."""
    args = typing.get_args(kind)
    if (typing.get_origin(kind) in (typing.Union, types.UnionType)) and type(None) in args:
        if raw.strip().lower() in _NONE_WORDS:
            return None
        kind = next(a for a in args if a is not type(None))
    if isinstance(kind, type) and issubclass(kind, Enum):
        if raw not in kind.__members__:
            *most, last = kind.__members__
            raise LmptError(f"{key}={raw} is unknown: use {', '.join(most)}{' or ' if most else ''}{last}")
        return kind[raw]
    try:
        if kind is bool:
            if raw.lower() in ("true", "yes", "1"):
                return True
            if raw.lower() in ("false", "no", "0"):
                return False
            raise ValueError
        if kind is int:
            return int(raw)
        if kind is float:
            return float(raw)
        if typing.get_origin(kind) is list:
            inner = raw[1:-1] if raw.startswith("[") and raw.endswith("]") else raw
            return [part.strip() for part in inner.split(",") if part.strip()]
    except ValueError:
        raise LmptError(f"{key}={raw!r} is not a valid {kind.__name__}") from None
    return raw


def usage(prog: str, summary: str, positionals: list[tuple[str, str]], cls: type) -> str:
    """The --help text: what the command does, its arguments and every key with default and description."""
    lines = [f"usage: {prog} {' '.join(name for name, _ in positionals)} [key=value ...]", "", summary, ""]
    lines += [f"  {name:<16} {doc}" for name, doc in positionals]
    lines += ["", "keys:"]
    for key in option_keys(cls):
        default = "required" if key.required else f"default {key.default!r}"
        lines.append(f"  {key.name + '=':<16} {key.doc} ({default})")
    return "\n".join(lines)


@dataclasses.dataclass(frozen=True)
class OptionKey:
    """One key of a command: a field of its options dataclass, or `section.field` of a nested dataclass field."""

    name: str
    kind: Any
    default: Any
    required: bool
    doc: str


def option_keys(cls: type, prefix: str = "") -> list[OptionKey]:
    """Every key of `cls`, in order; a field whose type is a dataclass gives its own fields as `field.key`."""
    hints, docs, keys = typing.get_type_hints(cls), field_docs(cls), []
    for field in dataclasses.fields(cls):
        kind = hints[field.name]
        if dataclasses.is_dataclass(kind):
            keys += option_keys(kind, f"{prefix}{field.name}.")  # type: ignore[arg-type]
            continue
        default = field.default_factory() if field.default_factory is not dataclasses.MISSING else field.default
        required = field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
        keys.append(OptionKey(prefix + field.name, kind, default, required, docs.get(field.name, "")))
    return keys


def _build(cls: type[T], given: dict[str, Any], prefix: str = "") -> T:
    """`cls` from dotted `given` values; nested dataclass fields are built from their `field.` keys."""
    hints, values = typing.get_type_hints(cls), {}
    for field in dataclasses.fields(cast(Any, cls)):
        if dataclasses.is_dataclass(hints[field.name]):
            values[field.name] = _build(hints[field.name], given, f"{prefix}{field.name}.")
        elif prefix + field.name in given:
            values[field.name] = given[prefix + field.name]
    return cls(**values)


def parse_command(
    argv: list[str], prog: str, summary: str, positionals: list[tuple[str, str]], cls: type[T]
) -> tuple[list[str], T]:
    """(positional arguments, options) from `argv`; --help prints the usage and exits 0. A last positional named
    `NAME...` takes one or more arguments. A token `key=value` whose key names no option, a missing or extra
    argument, or a bad value raises LmptError."""
    if any(a in ("-h", "--help") for a in argv):
        print(usage(prog, summary, positionals, cls))
        sys.exit(0)
    keys = {key.name: key for key in option_keys(cls)}
    given: dict[str, Any] = {}
    args: list[str] = []
    for token in argv:
        key, sep, raw = token.partition("=")
        if not sep or not all(part.isidentifier() for part in key.split(".")):
            args.append(token)
            continue
        if key not in keys:
            raise LmptError(f"unknown key '{key}' for {prog}: use one of {', '.join(keys)} (`{prog} --help`)")
        given[key] = _convert(key, raw, keys[key].kind)
    variadic = bool(positionals) and positionals[-1][0].endswith("...")
    if len(args) != len(positionals) and not (variadic and len(args) > len(positionals)):
        wanted = " ".join(name for name, _ in positionals)
        raise LmptError(f"{prog} takes {wanted}, got {len(args)} argument(s) {args}: see `{prog} --help`")
    missing = [name for name, key in keys.items() if key.required and name not in given]
    if missing:
        raise LmptError(f"{prog} needs {', '.join(f'{m}=...' for m in missing)}: see `{prog} --help`")
    options = _build(cls, given)
    # json=true: stdout carries the JSON document alone, so status lines and warnings go to stderr
    console.stderr = bool(getattr(options, "json", False))
    return args, options


def run_command(body: Callable[[list[str]], None], prog: str = "lmpt", argv: list[str] | None = None) -> NoReturn:
    """Run `body(argv)` (default: this process's arguments); an LmptError or OSError ends as `PROG: error: ...` on
    one line and exit 2."""
    try:
        body(sys.argv[1:] if argv is None else argv)
    except LmptError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except OSError as exc:
        where = f": {exc.filename}" if exc.filename else ""
        print(f"{prog}: error: {exc.strerror or exc}{where}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print(f"{prog}: aborted", file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)
    finally:
        console.stderr = False
    sys.exit(0)


def require(condition: bool, message: str) -> None:
    """Raise LmptError(message) unless `condition`."""
    if not condition:
        raise LmptError(message)
