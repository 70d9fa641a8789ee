"""A reproduction's document, NAME.md (from a template), its plot, its summary NAME.json, and its row in a README's
table "Published results, reproduced". Every file is written atomically; a README's table keeps every row this
reproduction did not write. The document and the JSON record what produced them: lmpt's version and commit, torch's,
the machine and each run's threads."""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
from datetime import date
from pathlib import Path
from typing import Any

import lmpt
from lmpt.errors import LmptError
from lmpt.report.markdown import markdown_table, render
from lmpt.reproduce.reproduction import Findings, Reproduction
from lmpt.reproduce.verdict import claims_list, conditions_table
from lmpt.safe_files import write_atomically
from lmpt.train.display import format_duration

START, END = "<!-- reproductions -->", "<!-- /reproductions -->"
HEADER = ["paper", "claim", "lmpt's figure", "verdict", "command", "CPU time"]


def machine() -> str:
    """The CPU and cores the grid ran on, in a few words."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model or platform.processor() or platform.machine()}, {os.cpu_count()} cores, {platform.system()}"


def provenance(grid: dict[str, Any]) -> dict[str, Any]:
    """What produced a document: lmpt's version and commit (git's, where lmpt runs from a checkout), torch's and
    Python's versions, the machine, and the grid's slots and threads a run (from its time record)."""
    import torch

    checkout = Path(lmpt.__file__).resolve().parents[1]
    commit = "not a git checkout"
    if (checkout / ".git").exists():
        done = subprocess.run(
            ["git", "-C", str(checkout), "describe", "--always", "--dirty"], capture_output=True, text=True
        )
        commit = done.stdout.strip() or commit
    return {
        "lmpt": getattr(lmpt, "__version__", "unknown"),
        "commit": commit,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "machine": machine(),
        "slots": grid.get("slots"),
        "threads_per_run": grid.get("threads_per_run"),
    }


def write_document(
    reproduction: Reproduction, findings: Findings, out: Path, grid: dict[str, Any], core_s: float, missing: int = 0
) -> Path:
    """NAME.md, NAME.png and NAME.json under `out`, each written atomically; the document's path. `grid` is the
    grid's time record (lmpt.reproduce.grid.grid_time), `missing` the runs of the plan not completed."""
    out.mkdir(parents=True, exist_ok=True)
    name = reproduction.name
    plot = out / f"{name}.png"
    if findings.plot is not None:
        figure = findings.plot
        write_atomically(plot, lambda tmp: figure.savefig(tmp, dpi=110, format="png"))
    made = provenance(grid)
    produced = (
        f"lmpt {made['lmpt']} at {made['commit']}, torch {made['torch']}, Python {made['python']}; {made['machine']}; "
        f"slots {', '.join(made['slots'] or ['—'])}, threads a run: {made['threads_per_run']}"
    )
    time = (
        f"{format_duration(float(grid.get('wall_s', 0.0)))} wall clock over {grid.get('launches', 0)} launch(es); "
        f"{format_duration(core_s)} of training and scoring over all runs (core-seconds)"
    )
    if missing:
        time += f"; {missing} planned run(s) not completed (their claims say so)"
    text = render(
        "lmpt.reproduce",
        "reproduction.md.j2",
        title=reproduction.title,
        claims=claims_list(findings.claims),
        paper=reproduction.paper,
        claim=reproduction.claim,
        command=reproduction.command_line(),
        produced=produced,
        time=time,
        conditions=conditions_table(findings.conditions),
        papers=reproduction.papers_figures,
        plot=f"![{name}]({plot.name})\n\n" if findings.plot is not None else "",
        sections="\n\n".join(f"### {heading}\n\n{body}" for heading, body in findings.sections),
        cost=reproduction.cost_note,
        day=date.today().isoformat(),
    )
    path = out / f"{name}.md"
    write_atomically(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    summary = {
        "name": name,
        "paper": reproduction.paper.split(",")[0].split(" (")[0] + " " + reproduction.paper.split("(")[1][:4],
        "claim": reproduction.claim.split(":")[0],
        "figure": findings.headline,
        "verdict": findings.verdict,
        "claims": [
            {"claim": c.claim, "verdict": c.word, "figure": c.figure, "reasons": list(c.reasons)}
            for c in findings.claims
        ],
        "conditions": [
            {"name": c.name, "paper": c.paper, "grid": c.grid, "met": c.met, "why": c.why} for c in findings.conditions
        ],
        "command": reproduction.command_line(),
        "cpu_time": format_duration(core_s),
        "wall_s": float(grid.get("wall_s", 0.0)),
        "missing_runs": missing,
        "produced_by": made,
    }
    write_atomically(
        path.with_suffix(".json"), lambda tmp: tmp.write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    )
    return path


def readme_row(summary_file: Path, readme: Path) -> list[str]:
    """The README table's row of one reproduction, from its NAME.json (linking NAME.md beside it)."""
    try:
        s = json.loads(summary_file.read_text(encoding="utf-8"))
        link = os.path.relpath(summary_file.with_suffix(".md"), readme.parent)
        return [s["paper"], s["claim"], s["figure"], f"[{s['verdict']}]({link})", f"`{s['command']}`", s["cpu_time"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise LmptError(
            f"{summary_file} is no reproduction summary ({exc}): write it again with lmpt-reproduce"
        ) from None


def readme_text(readme: Path) -> str:
    """`readme`'s text, checked to take a reproduction's row: one LmptError line naming readme= for a README that
    cannot be read (missing, a folder), is not UTF-8, or has no table between its markers in order. The command
    checks it before any run trains, and again when it writes."""
    try:
        text = readme.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise LmptError(f"readme={readme} is not UTF-8 text: give the README to update") from None
    except OSError as exc:
        raise LmptError(f"readme={readme} cannot be read ({exc.strerror}): give the README to update") from None
    start, end = text.find(START), text.find(END)
    if start < 0 or end < start:
        raise LmptError(
            f"readme={readme} has no table between {START} and {END} (in that order): add the two markers where the "
            "table goes, or leave readme= out"
        )
    return text


def update_readme(readme: Path, summary_file: Path) -> None:
    """Put the reproduction of `summary_file` into `readme`'s table between its markers: its own row replaced (or
    added), every other row kept as it was (`readme_text` refuses a README that cannot take it; nothing written)."""
    text = readme_text(readme)
    start, end = text.find(START), text.find(END)
    row = readme_row(summary_file, readme)
    link = re.compile(r"\]\(([^)]*)\)")
    kept = []
    for line in text[start + len(START) : end].strip().splitlines()[2:]:  # past the header and its rule
        target = link.search(line)
        if target is None or Path(target.group(1)).stem != summary_file.stem:
            kept.append(line)
    table = markdown_table(HEADER, [row])
    lines = [*table[:2], *sorted([*kept, table[2]])]
    body = "\n".join(lines)
    new = f"{text[:start]}{START}\n{body}\n{text[end:]}"
    write_atomically(readme, lambda tmp: tmp.write_text(new, encoding="utf-8"))
