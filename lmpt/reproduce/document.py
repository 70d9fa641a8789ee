"""A reproduction's document, docs/reproductions/NAME.md (from a template), its plot, its one-line summary
(NAME.json) and the README's table "Published results, reproduced" rebuilt from every summary between its markers."""

from __future__ import annotations

import json
import os
import platform
from datetime import date
from pathlib import Path
from string import Template

from lmpt.reproduce.reproduction import Findings, Reproduction
from lmpt.study.record import markdown_table
from lmpt.train.display import format_duration

DOCUMENT = Template("""# Reproduction: $title

$verdict

- **Paper**: $paper
- **Claim checked**: $claim
- **Command**: `$command` (the same command resumes it after a kill; `dry_run=true` shows the plan and writes nothing)
- **Machine**: $machine
- **Time**: $time

## The paper's figures

$papers

## lmpt's figures

![$name]($plot)

$sections

## Scale and cost

$cost

_Written by `$command` on $day._
""")
START, END = "<!-- reproductions -->", "<!-- /reproductions -->"


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


def write_document(reproduction: Reproduction, findings: Findings, out: Path, wall_s: float, core_s: float) -> Path:
    """docs/reproductions/NAME.md, NAME.png and NAME.json under `out`; the document's path."""
    out.mkdir(parents=True, exist_ok=True)
    name = reproduction.name
    plot = out / f"{name}.png"
    if findings.plot is not None:
        findings.plot.savefig(plot, dpi=110)
    time = (
        f"{format_duration(wall_s)} wall clock; {format_duration(core_s)} of training and scoring over all runs "
        "(core-seconds)"
    )
    text = DOCUMENT.substitute(
        title=reproduction.title,
        name=name,
        verdict=f"**Verdict: {findings.verdict}**",
        paper=reproduction.paper,
        claim=reproduction.claim,
        command=reproduction.command_line(),
        machine=machine(),
        time=time,
        papers=reproduction.papers_figures,
        plot=plot.name,
        sections="\n\n".join(f"### {heading}\n\n{body}" for heading, body in findings.sections),
        cost=reproduction.cost_note,
        day=date.today().isoformat(),
    )
    path = out / f"{name}.md"
    path.write_text(text, encoding="utf-8")
    summary = {
        "name": name,
        "paper": reproduction.paper.split(",")[0].split(" (")[0] + " " + reproduction.paper.split("(")[1][:4],
        "claim": reproduction.claim.split(":")[0],
        "figure": findings.headline,
        "verdict": findings.verdict.split(":")[0],
        "command": reproduction.command_line(),
        "cpu_time": format_duration(core_s),
    }
    (out / f"{name}.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    return path


def update_readme(readme: Path, out: Path) -> bool:
    """Rebuild the README's table between its markers from every NAME.json under `out`; False when it has none."""
    if not readme.is_file():
        return False
    text = readme.read_text(encoding="utf-8")
    if START not in text or END not in text:
        return False
    rows = []
    for summary_file in sorted(out.glob("*.json")):
        s = json.loads(summary_file.read_text())
        rows.append(
            [
                s["paper"],
                s["claim"],
                s["figure"],
                f"[{s['verdict']}]({os.path.relpath(out / (s['name'] + '.md'), readme.parent)})",
                f"`{s['command']}`",
                s["cpu_time"],
            ]
        )
    table = "\n".join(markdown_table(["paper", "claim", "lmpt's figure", "verdict", "command", "CPU time"], rows))
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    readme.write_text(f"{head}{START}\n{table}\n{END}{tail}", encoding="utf-8")
    return True
