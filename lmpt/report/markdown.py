"""Markdown tables: the one writer of the GitHub tables that lmpt's documents (study.md, the run tables of
lmpt.report.table, the reproductions, the benchmark pages) are made of."""

from __future__ import annotations

from collections.abc import Sequence


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]], numeric: Sequence[bool] = ()) -> list[str]:
    """GitHub Markdown lines of a table; a column is right-aligned where `numeric` says so."""
    align = [("---:" if i < len(numeric) and numeric[i] else "---") for i in range(len(header))]
    escape = lambda text: str(text).replace("|", "\\|").replace("\n", " ")
    return ["| " + " | ".join(map(escape, row)) + " |" for row in [header, align, *rows]]
