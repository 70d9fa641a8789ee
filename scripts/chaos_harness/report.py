"""The harness's table: per case, the kills, where they landed, the resumes and the verdict; printed with rich
and written as markdown and JSON."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.table import Table

from chaos_harness.soak import CaseResult

PHASES = ("start-up", "cache build", "step", "evaluation", "checkpoint write", "final save", "scoring")
COLUMNS = ("case", "kills", "kill -9", "SIGTERM", *PHASES, "graceful", "resumes", "rounds", "sha256", "verdict")


def rows(results: list[CaseResult]) -> list[list[str]]:
    """One row per case and a total row."""

    def row(name: str, group: list[CaseResult]) -> list[str]:
        kills = [k for r in group for k in r.kills]
        phases = [sum(r.phases[p] for r in group) for p in PHASES]
        return [
            name,
            str(len(kills)),
            str(sum(k["signal"] == "SIGKILL" for k in kills)),
            str(sum(k["signal"] == "SIGTERM" for k in kills)),
            *(str(n) for n in phases),
            str(sum(k["graceful"] for k in kills)),
            str(sum(r.resumes for r in group)),
            str(sum(r.rounds for r in group)),
            "same" if all(r.same_sha256 for r in group) else "differs",
            "identical" if all(r.verdict == "identical" for r in group) else "differs",
        ]

    return [*(row(r.name, [r]) for r in results), row("all", results)]


def print_table(results: list[CaseResult], console: Console) -> None:
    table = Table(title="lmpt chaos: kills, where they landed, and the resumed runs against uninterrupted ones")
    for column in COLUMNS:
        table.add_column(column, justify="left" if column in ("case", "verdict") else "right")
    for values in rows(results):
        style = "green" if values[-1] == "identical" else "bold red"
        table.add_row(*values[:-1], f"[{style}]{values[-1]}[/]", end_section=values[0] == results[-1].name)
    console.print(table)
    for result in results:
        for problem in result.problems:
            console.print(f"[bold red]{result.name}:[/] {problem}")


def markdown(results: list[CaseResult]) -> str:
    """The table as GitHub markdown."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(values) + " |" for values in rows(results)]
    return "\n".join(lines) + "\n"


def write(results: list[CaseResult], out: Path, header: dict) -> None:
    """chaos.md (the table) and chaos.json (every kill) in `out`."""
    out.mkdir(parents=True, exist_ok=True)
    facts = "\n".join(f"- {key}: {value}" for key, value in header.items())
    (out / "chaos.md").write_text(f"{facts}\n\n{markdown(results)}")
    cases = [
        {
            "case": r.name,
            "verdict": r.verdict,
            "rounds": r.rounds,
            "resumes": r.resumes,
            "same_sha256": r.same_sha256,
            "phases": dict(r.phases),
            "problems": r.problems,
            "kills": r.kills,
        }
        for r in results
    ]
    (out / "chaos.json").write_text(json.dumps({**header, "cases": cases}, indent=1) + "\n")
