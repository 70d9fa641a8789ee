"""Markdown documents: the one writer of the GitHub tables that lmpt's documents (study.md, the run tables of
lmpt.report.table, the reproductions, the benchmark pages) are made of, and the one way a document comes from its
template (a package's `templates/` folder, rendered by jinja2: study.md, study_full.md, a reproduction's NAME.md)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import jinja2


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]], numeric: Sequence[bool] = ()) -> list[str]:
    """GitHub Markdown lines of a table; a column is right-aligned where `numeric` says so."""
    align = [("---:" if i < len(numeric) and numeric[i] else "---") for i in range(len(header))]
    escape = lambda text: str(text).replace("|", "\\|").replace("\n", " ")
    return ["| " + " | ".join(map(escape, row)) + " |" for row in [header, align, *rows]]


@functools.cache
def _templates(package: str) -> jinja2.Environment:
    """`package`'s document templates (its `templates/` folder), each output line a line of its template."""
    return jinja2.Environment(
        loader=jinja2.PackageLoader(package, "templates"),
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
        autoescape=False,
    )


def render(package: str, template: str, **context: Any) -> str:
    """The document `template` of `package` (e.g. "lmpt.study", "study.md.j2") with `context`'s values; a value the
    template names and `context` lacks is an error, not an empty string."""
    return _templates(package).get_template(template).render(**context)
